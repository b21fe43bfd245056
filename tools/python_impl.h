// Python callables as implementations (docs/python.md): `--python MODULE:CALLABLE` registers the
// callable as topk_decode@py, the one op this step adapts, so every property, the corpus, the
// fuzzing stage, the guards, the child processes, case files and repro run against it unchanged.
//
// mlacheck embeds the interpreter (tools/python_impl.cpp, built when CMake finds Python 3 with
// its embedding library and pybind11: MLACHECK_PYTHON); without it, tools/python_off.cpp says so
// in one line. The interpreter starts only in the process that first calls the implementation (a
// check's or a repro's child), never in the command's own process, which forks those children.
// Each call hands the callable torch tensors made through DLPack from exactly the guarded views the
// case declares (offset, padded rows, column strides), so a write past its output view lands in a
// guard and is reported with the buffer, the view, the row and the column.
#pragma once

#include <string>

namespace mlacheck::kernels {

// True when this mlacheck was built with the Python component; otherwise false, with *why_not
// saying how to get it.
bool python_component_built(std::string* why_not);

// Registers spec ("MODULE:CALLABLE", where MODULE is a module name found on sys.path, the current
// folder first, or a path to a .py file) as topk_decode@py and returns that name. First checks, in
// a forked child, that Python starts, torch and the module import and the callable exists; throws
// mlacheck::Error with one line naming spec when not, when a callable is registered already, or
// when the component was not built.
std::string load_python_isolated(const std::string& spec);

// The spec given to load_python_isolated, or "" (for the "rerun it with" lines of check).
std::string python_spec();

}  // namespace mlacheck::kernels
