// Python callables as implementations (docs/python.md): `--python [OP=]MODULE:CALLABLE` registers
// a Python function as OP@py, through the plugin interface (include/mlacheck/plugin.h), so every
// op a plugin can implement, the stateful ones included, every property, the corpus, the fuzzing
// stage, the guards, child processes, case files and repro run against it unchanged.
//
// The function runs in a Python worker process (python/mlacheck/_worker.py, built into the
// executable), started by the first process that calls it: the user's own Python, the one that has
// their torch ($MLACHECK_PYTHON, else python3 on PATH). Nothing of Python is linked into mlacheck.
// The worker maps mlacheck's guarded buffers themselves (host: a shared memory file,
// core/shared_arena.h; cuda: CUDA IPC handles), so the tensors it hands the function alias exactly
// the views a case declares (offset, padded rows, strides) and a write past a view lands in a guard
// and is reported with the buffer, the view, the row and the column.
#pragma once

#include <string>
#include <vector>

namespace mlacheck::kernels {

// Registers each spec ("[OP=]MODULE:CALLABLE", MODULE a module name on sys.path, the current folder
// first, or a path to a .py file) as OP@py and returns those names. OP, when not given, is the
// callable's `mlacheck_op` attribute (@mlacheck.implements) or its name when that is an op. Its
// contract is its `mlacheck_contract` attribute. Imports everything first in a worker started from
// a forked child; throws mlacheck::Error with one line (a module that does not import, no torch,
// no such callable, an unknown op, two callables for one op, a malformed contract).
// lend_for ("host" or "cuda", device 0): the probe's worker is started in this process instead, its
// callables loaded for that backend, and lent to the first child that runs cases there, which then
// starts no worker of its own (kernels/python_worker.h); a probe that fails is repeated in a child,
// as without it. "": the probe's worker lives and dies in a child.
std::vector<std::string> load_python_isolated(const std::vector<std::string>& specs,
                                              const std::string& lend_for = "");

// How long a Python worker may take to start and load the callables (the probe's limit, and a
// child's first call's): the larger of 60 s and seconds (a command's budget); 120 s unless set. A
// module that does not finish importing in it is one line, exit 2.
void set_python_start_limit(double seconds);

// The callables load_python_isolated loaded, as the value of $MLACHECK_PYTHON_LOADED (each spec with
// the op and contract its probe found), or "": what a process this one starts by exec (a fuzzing
// harness, tools/fuzz_command.h) needs to register the same callables without probing them again.
std::string python_loaded_environment();

// Registers the callables $MLACHECK_PYTHON_LOADED names, as load_python_isolated did in the process
// that set it, and returns their names (none when it is unset). Starts no Python: each callable's
// worker starts on its first call, as after load_python_isolated. Throws mlacheck::Error for a
// malformed value.
std::vector<std::string> load_python_from_environment();

// The specs given to load_python_isolated, as flags: " --python S1 --python S2", or "".
std::string python_flags();

// Seconds load_python_isolated's worker took to start and import the callables (0 when none was
// started: no --python, or OP=-): what each child of a run spends again before its first case; 0
// while the worker it lent is there for the next child (which then spends nothing).
double python_start_seconds();

// The docs/bugs.md row (a bug id, "T1") the loaded Python callable of op declares it mirrors
// (mlacheck_mirrors, @mlacheck.implements(..., mirrors=)), or "": mutants takes that row's named check.
std::string python_mirrors(const std::string& op);

}  // namespace mlacheck::kernels
