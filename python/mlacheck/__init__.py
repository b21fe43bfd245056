"""mlacheck from Python: check a Python function with an op's whole property suite.

    import mlacheck
    from my_kernels import topk_decode          # a module-level function
    v = mlacheck.check("topk_decode", topk_decode, budget=20)
    print(v)                                     # the row `mlacheck check` prints
    assert v, v.verdict                          # a Verdict is true when the suite passed

This package drives the `mlacheck` executable (`mlacheck check --python FILE:NAME --format json`):
the properties, generators and shrinking are C++ (RapidCheck, which cannot be loaded into a Python
process here), and the function runs in the executable's child process on the guarded views, lent
to it as torch tensors (docs/python.md). The executable is $MLACHECK_BIN, else `mlacheck` on PATH.
"""
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

__all__ = ["OPS", "Case", "Cases", "Verdict", "cases", "check", "binary", "implements", "properties", "property", "test_of", "CheckFailed"]

# The ops a Python function can stand in for (docs/ops.md; docs/python.md gives each one's arguments):
# the worker's list, the one that refuses a callable of any other op.
from ._worker import OPS  # noqa: E402


def _require_op(op):
    if op not in OPS:
        raise ValueError("mlacheck: '%s' is not an op (the ops: %s)" % (op, ", ".join(OPS)))


def implements(op, contract=None, mirrors=None):
    """Marks a function as op's implementation, with its contract (what it accepts, narrower than
    the spec: "k <= 2048", "out contiguous", one clause per line or a list; docs/plugins.md has the
    terms). `mlacheck check --python FILE:NAME` then needs no OP=, and never reports a case outside
    the contract as a failure:

        @mlacheck.implements("topk_decode", contract=["k <= 2048", "out contiguous"])
        def my_topk(logits, next_n, seq_lens, k, out): ...

    mirrors ("T1") names the docs/bugs.md row a deliberately wrong function reproduces: `mlacheck
    mutants --python FILE:NAME` runs it as a variant of the kill matrix, with that row's named check.
    """
    _require_op(op)
    if contract is not None and not isinstance(contract, str):
        contract = "\n".join(contract)
    if mirrors is not None and not re.fullmatch(r"[A-Z][0-9]+", str(mirrors)):
        raise ValueError("mlacheck: mirrors=%r is not a bug id of docs/bugs.md (a capital and digits: 'T1')" % (mirrors,))

    def mark(fn):
        fn.mlacheck_op = op
        if contract:
            fn.mlacheck_contract = contract
        if mirrors:
            fn.mlacheck_mirrors = mirrors
        return fn

    return mark


class Verdict:
    """One implementation's result: passed, result (PASS, FAIL, NO RUN, PARTIAL or DEFECT: a case that
    fails on the op's reference too, a fault of the suite, never a pass), cases_run, the
    first failing check and its verdict, the failing case's text and the file it was saved in, and
    failures: every failing property's (property, stage, check, verdict, case, saved_as), first
    first. unjudged says which properties ran no case, and why ("" when every one was judged)."""

    def __init__(self, row, save_dir):
        self.implementation = row["implementation"]
        self.passed = bool(row["passed"])
        self.result = row.get("result", "PASS" if self.passed else "FAIL")  # PASS, FAIL, NO RUN, PARTIAL, DEFECT
        self.cases_run = int(row["cases_run"])
        self.stage = row.get("stage", "")
        self.check = row.get("check", "")
        self.verdict = row.get("verdict", "")
        self.case = row.get("case", "")
        self.unjudged = row.get("unjudged", "")
        self.failures = row.get("failures", [])
        name = self.implementation.replace("@", "-") + ".case"
        self.case_file = os.path.join(save_dir, name) if self.result == "FAIL" and self.case else None

    def __bool__(self):
        return self.passed

    def __str__(self):
        if self.passed:
            return "%s  PASS  %d  -" % (self.implementation, self.cases_run)
        if self.result in ("NO RUN", "PARTIAL", "DEFECT"):  # no failure of its own, but never a pass
            return "%s  %s  %d  %s" % (self.implementation, self.result, self.cases_run, self.verdict)
        line = "%s  FAIL  %d  %s: %s: %s" % (self.implementation, self.cases_run, self.stage, self.check, self.verdict)
        if self.case_file:
            line += "\n(case saved as %s; rerun it with `mlacheck repro %s --python ...`)" % (self.case_file, self.case_file)
        for f in self.failures[1:]:
            line += "\n%s  FAIL  %s: %s: %s" % (self.implementation, f["stage"], f["check"], f["verdict"])
            if f.get("saved_as"):
                line += "\n(case saved as %s)" % f["saved_as"]
        if self.unjudged:
            line += "\nnot judged: %s" % self.unjudged
        return line

    __repr__ = __str__


def binary():
    """The mlacheck executable this package drives."""
    path = os.environ.get("MLACHECK_BIN") or shutil.which("mlacheck")
    if not path:
        raise RuntimeError("mlacheck: no mlacheck executable (set MLACHECK_BIN, or put mlacheck on PATH: "
                           "bash scripts/main.sh installs it)")
    return path


def _spec(fn):
    if not callable(fn):
        raise TypeError("mlacheck: %r is not callable" % (fn,))
    name = getattr(fn, "__qualname__", "")
    if not name or "<" in name or "." in name:
        raise TypeError("mlacheck: %r must be a function defined at module level (the check runs it by "
                        "file and name in a child process)" % (fn,))
    try:
        source = inspect.getsourcefile(fn)
    except TypeError:
        source = None
    if not source:
        raise TypeError("mlacheck: %r has no source file to load it from" % (fn,))
    return "%s:%s" % (os.path.abspath(source), name)


def properties(op):
    """The properties of op that run on an implementation (not those of mlacheck's own kernel
    paths), as `mlacheck list` names them: ["topk_decode.rows_admissible", ...]."""
    _require_op(op)
    p = subprocess.run([binary(), "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise RuntimeError((p.stderr.strip().splitlines() or ["mlacheck list exited %d" % p.returncode])[-1])
    out, inside = [], False
    for line in p.stdout.splitlines():
        if line.startswith("properties ("):
            inside = True
            continue
        if inside and not line.startswith("  "):
            break
        if inside:
            words = line.split(None, 1)
            if words and words[0].startswith(op + ".") and not (len(words) > 1 and words[1].startswith("ref only")):
                out.append(words[0])
    return out


def _property_flags(property):  # noqa: A002 - the keyword users pass
    """--property once per name: property is None, one name, or a list of names."""
    if property is None:
        return []
    names = [property] if isinstance(property, str) else list(property)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError("property: a property's name (mlacheck.properties(op) lists them) or a list of them")
    return [a for n in names for a in ("--property", n)]


def _worker_env():
    """The environment of a command check() runs: its workers in this Python, and forked by the
    zygote the commands of this user share (docs/python.md, "Many commands, one import"), so that a
    test suite calling check() many times imports torch once, not once a call. A
    $MLACHECK_PYTHON_ZYGOTE of the caller's (0: none) is kept."""
    env = dict(os.environ, MLACHECK_PYTHON=sys.executable)
    if not env.get("MLACHECK_PYTHON_ZYGOTE"):
        env["MLACHECK_PYTHON_ZYGOTE"] = os.path.join(tempfile.gettempdir(), "mlacheck-%d" % os.getuid())
    return env


def check(op, fn, budget=10, backend="host", seed=None, save="mlacheck-cases", contract=None, property=None,
          isolate=True, fail_fast=False, shrink=True, fuzz=True):
    """Runs op's whole suite (properties, corpus regressions, fuzzing for budget seconds) on fn.

    fn runs in a worker under this very Python (sys.executable), so it sees the torch, Triton and
    modules this process sees. contract (a string of clauses, one per line, or a list) narrows the
    cases to what fn accepts, as @implements(op, contract=...) does. Returns a Verdict. Raises
    ValueError for an unknown op or a malformed contract, TypeError for fn that is not a
    module-level function, RuntimeError with mlacheck's one line for other bad input (a module that
    does not import, no torch, a backend not usable here). property ("topk_decode.rows_admissible",
    or a list of them) runs those properties alone. Every property is judged (v.failures lists each failing one);
    fail_fast=True stops at the first failure; shrink=False saves a failing random case as found
    (by default it is made smaller in what is left of the budget); fuzz=False ends after the
    properties and the regressions (a fixed set of cases, which the budget only caps). isolate=False runs fn in this process through
    cases() (a lambda or a closure will do; a CUDA fault then ends this process's CUDA context)."""
    _require_op(op)
    if not isolate:
        run = Cases(op, budget=budget, backend=backend, seed=seed, save=save, contract=contract, property=property,
                    fuzz=fuzz)
        for case in run:
            case.run(fn)
        return run.verdict
    cmd = [binary(), "check", "--python", op + "=" + _spec(fn), "--impl", op + "@py", "--budget", str(budget),
           "--backend", backend, "--format", "json", "--save", save]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    cmd += _property_flags(property)
    if fail_fast:
        cmd += ["--fail-fast"]
    if not shrink:
        cmd += ["--no-shrink"]
    if not fuzz:
        cmd += ["--no-fuzz"]
    env = _worker_env()
    if contract is not None:
        env["MLACHECK_PYTHON_CONTRACT"] = contract if isinstance(contract, str) else "\n".join(contract)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env)
    if p.returncode not in (0, 1):
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        line = lines[-1] if lines else "mlacheck exited %d" % p.returncode
        if "contract" in line:
            raise ValueError(line)
        raise RuntimeError(line)
    rows = json.loads(p.stdout)["implementations"]
    return Verdict(rows[0], save)


class Case:
    """One case of an op, served by mlacheck: args are the op's arguments (torch tensors that alias
    mlacheck's guarded buffers, and numbers), as a function given to check() would get them. Write
    the answer into the output tensors; call fail(message) to report that the code under test
    refused or raised."""

    def __init__(self, op, args):
        self.op = op
        self.args = args
        self.failure = None

    def __getattr__(self, name):
        try:
            return self.__dict__["args"][name]
        except KeyError:
            raise AttributeError(name) from None

    def fail(self, message):
        self.failure = " ".join(str(message).split())

    def run(self, fn):
        """fn called with the arguments it names (as check() calls a function); what it raises is
        the case's failure, reported with the case."""
        from ._worker import call_with, describe
        try:
            out = call_with(fn, self.op, self.args)
        except Exception as e:  # noqa: BLE001 - the function's exception is the verdict
            self.fail("raised " + describe(e))
            return None
        if out is not None and not any(out is a for a in self.args.values()):
            self.fail("returned a %s instead of None: write the answer into the output tensors in place"
                      % type(out).__name__)
        return out

    def __repr__(self):
        return "<mlacheck case of %s: %s>" % (self.op, ", ".join(sorted(self.args)))


class Cases:
    """Iterates the cases mlacheck's suite for op draws (seed cases, regressions, random cases,
    shrinking), each handed to this Python process as a Case; the suite judges what the loop body
    wrote (guards, oracle) and verdict holds the result once the loop ends:

        run = mlacheck.cases("topk_decode", seed=1, budget=10)
        for case in run:
            case.run(my_topk)             # my_topk(...) with the arguments it names; or use case.logits, ...
        print(run.verdict)                # the row `mlacheck check` prints

    The code under test runs in this process, not in a child: a CUDA fault here ends this
    process's CUDA context (check() runs a function in a child instead). Stateless ops only.
    fuzz=False ends the loop after the properties and the regressions, as check(fuzz=False)."""

    def __init__(self, op, budget=10, backend="host", seed=None, save="mlacheck-cases", contract=None, property=None,
                 cases=None, fuzz=True):
        _require_op(op)
        if op in ("decode_metadata", "mla_decode_impl", "indexer_decode_step"):
            raise ValueError("mlacheck: cases() serves stateless ops; %s is an object: use check()" % op)
        self.op, self.save, self.verdict = op, save, None
        self.cmd = [binary(), "check", "--python", op + "=-", "--impl", op + "@py", "--budget", str(budget),
                    "--backend", backend, "--format", "json", "--save", save]
        if seed is not None:
            self.cmd += ["--seed", str(seed)]
        self.cmd += _property_flags(property)
        if cases is not None:
            self.cmd += ["--cases", str(cases)]
        if not fuzz:
            self.cmd += ["--no-fuzz"]
        self.contract = contract

    def __iter__(self):
        import socket
        from . import _worker
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ, MLACHECK_DRIVER_FD=str(theirs.fileno()), MLACHECK_PYTHON=sys.executable)
        if self.contract is not None:
            env["MLACHECK_PYTHON_CONTRACT"] = (self.contract if isinstance(self.contract, str)
                                               else "\n".join(self.contract))
        out_file, err_file = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")  # never a full pipe
        proc = subprocess.Popen(self.cmd, env=env, pass_fds=[theirs.fileno()], stdout=out_file, stderr=err_file,
                                universal_newlines=True)
        theirs.close()
        worker = _worker.Worker(mine)
        finished = False
        try:
            while True:
                msg, fds = worker.receive()
                if msg is None:
                    break
                if msg["cmd"] != "call":
                    try:
                        reply = worker.handle(msg, fds)
                    except Exception as e:  # noqa: BLE001
                        reply = ["fail " + _worker.describe(e)]
                else:
                    worker.open_blocks(msg, fds)
                    case = Case(self.op, {k: worker.decode(v) for k, v in msg.get("args", {}).items()})
                    yield case
                    if case.failure is None:
                        worker.synchronize()
                    reply = ["ok"] if case.failure is None else ["fail " + case.failure]
                try:
                    worker.send(reply, msg)
                except (BrokenPipeError, ConnectionResetError):
                    break  # every process of the run has gone: its verdict is written
            finished = True
        finally:
            mine.close()
            if not finished:
                proc.kill()
            proc.wait()
        if not finished:
            return
        out_file.seek(0), err_file.seek(0)
        out, err = out_file.read(), err_file.read()
        if proc.returncode not in (0, 1):
            lines = [l for l in err.splitlines() if l.strip()]
            raise RuntimeError(lines[-1] if lines else "mlacheck exited %d" % proc.returncode)
        self.verdict = Verdict(json.loads(out)["implementations"][0], self.save)


def cases(op, budget=10, backend="host", seed=None, save="mlacheck-cases", contract=None, property=None, cases=None,
          fuzz=True):
    """The cases of op's suite as a loop in this process (see Cases)."""
    return Cases(op, budget=budget, backend=backend, seed=seed, save=save, contract=contract, property=property,
                 cases=cases, fuzz=fuzz)


class CheckFailed(AssertionError):
    """A failed check as a test failure: the verdict, the failing case and the file it was saved in."""


def test_of(op, fn, budget=10, backend="host", seed=None, save="mlacheck-cases", fuzz=True):
    """A pytest test (a plain function taking no arguments) that runs op's suite on fn:

        # test_my_kernels.py
        import mlacheck
        from my_kernels import topk_decode
        test_topk_decode = mlacheck.test_of("topk_decode", topk_decode, budget=20)

    It passes when the suite passes and fails with the CLI's row, the case's text and the saved
    case file (rerun it with `mlacheck repro FILE --python ...`). Being an ordinary test function,
    it works with pytest -x and -k. fuzz=False: the properties and regressions alone, so the test
    takes the time its cases take rather than the budget (check(fuzz=False)). Bad input (an op without Python support, a lambda)
    is raised here, when the test module is collected."""
    _require_op(op)
    _spec(fn)  # refuse a lambda or a nested function at collection, not when the test runs

    def test():
        __tracebackhide__ = True  # pytest's report starts at the verdict, not this frame
        v = check(op, fn, budget=budget, backend=backend, seed=seed, save=save, fuzz=fuzz)
        if not v:
            raise CheckFailed("%s\n%s" % (v, v.case))

    test.__name__ = "test_%s_%s" % (op, getattr(fn, "__name__", "callable"))
    test.__qualname__ = test.__name__
    test.__doc__ = "mlacheck: %s's whole suite on %s" % (op, _spec(fn))
    return test


# ---- the pytest plugin: `pytest -p mlacheck` ------------------------------------------------------


def property(op, budget=10, backend="host", seed=None, contract=None, fuzz=True):  # noqa: A001 - the decorator's name
    """Marks a module-level function as op's implementation, for `pytest -p mlacheck` to turn into
    one test per property of op (`test_file.py::my_topk[topk_decode.rows_admissible]`), each
    running that property's seed cases, regressions and random cases for budget seconds. The
    function itself is returned unchanged (it is still the implementation):

        @mlacheck.property("topk_decode", budget=20, backend="cuda")
        def my_topk(logits, next_n, seq_lens, k, out): ...

    A failure shows the verdict, the failing case and the saved case file. Tests are independent
    (each saves under mlacheck-cases/<property>), so -x, -k and pytest-xdist's -n work. fuzz=False:
    seed cases, --cases random ones and regressions only, ending when they are done."""
    _require_op(op)

    def mark(fn):
        _spec(fn)  # a lambda or nested function is refused at import, not when the tests run
        implements(op, contract)(fn)
        fn.mlacheck_property = dict(op=op, budget=budget, backend=backend, seed=seed, contract=contract, fuzz=fuzz)
        return fn

    return mark


def _property_test(fn, prop, options, save):
    def run():
        __tracebackhide__ = True  # pytest's report starts at the verdict, not this frame
        v = check(options["op"], fn, budget=options["budget"], backend=options["backend"], seed=options["seed"],
                  save=save, contract=options["contract"], property=prop, fuzz=options.get("fuzz", True))
        if not v:
            raise CheckFailed("%s\n%s" % (v, v.case))
    run.__doc__ = "mlacheck: %s on %s" % (prop, _spec(fn))
    return run


def pytest_pycollect_makeitem(collector, name, obj):
    """With `-p mlacheck`: a function marked by @mlacheck.property becomes one test per property."""
    options = getattr(obj, "mlacheck_property", None)
    if options is None or not callable(obj):
        return None
    import pytest
    items = []
    for prop in properties(options["op"]):
        save = os.path.join("mlacheck-cases", prop)
        items.append(pytest.Function.from_parent(collector, name="%s[%s]" % (name, prop),
                                                 callobj=_property_test(obj, prop, options, save)))
    return items


# ---- the guard: `pytest -p mlacheck --mlacheck-guard`, mlacheck.guard() (python/mlacheck/guard.py) -----

from .guard import NotDeterministic, StrayWrite, guard  # noqa: E402

__all__ += ["guard", "StrayWrite", "NotDeterministic"]

try:
    import pytest as _pytest
    # A new-style wrapper (pluggy 1.2, pytest 7.4 on): what it raises after its yield fails the test.
    _hookwrapper = _pytest.hookimpl(wrapper=True)
except (ImportError, TypeError):  # no pytest (the hooks below are never called), or one too old
    def _hookwrapper(f):
        return f


def pytest_addoption(parser):
    group = parser.getgroup("mlacheck")
    group.addoption("--mlacheck-guard", action="store_true", default=False,
                    help="guard every custom-op call and Triton launch of each test (docs/guard.md)")
    group.addoption("--mlacheck-guard-ns", default=None, metavar="PATTERNS",
                    help="the op namespaces the guard watches, comma-separated fnmatch patterns "
                         "(default: every namespace but aten and prim)")
    group.addoption("--mlacheck-guard-save", default="mlacheck-guard", metavar="DIR",
                    help="where a failing call is saved (default mlacheck-guard)")
    group.addoption("--mlacheck-guard-poison", action="store_true", default=False,
                    help="fill what torch.empty makes with NaN (integers: bytes 0xA5), so an element a kernel "
                         "never wrote is visible")
    group.addoption("--mlacheck-guard-alloc", action="store_true", default=False,
                    help="make torch's CUDA allocator the guard's red-zone allocator at start (implies "
                         "--mlacheck-guard): a write past a tensor's end, or before its start, is found even where "
                         "the view is the whole tensor; blocks freed while a captured graph lives are quarantined")
    group.addoption("--mlacheck-guard-scratch", default=None, metavar="ARGS",
                    help="arguments an op may write though its schema marks them read-only (a workspace), "
                         "comma-separated NAME or OP:NAME fnmatch patterns, e.g. '_C.*topk:workspace'")
    group.addoption("--mlacheck-guard-repeat", type=int, default=1, metavar="N",
                    help="run each guarded custom-op call and Triton launch N times on the same inputs; its outputs must agree "
                         "bitwise (a top-k's rows as sets)")


def pytest_configure(config):
    if config.getoption("--mlacheck-guard-alloc", False):
        from .guard import install_allocator
        try:
            install_allocator()  # before the session's first CUDA allocation
        except RuntimeError as e:
            raise _pytest.UsageError(str(e))
    config.addinivalue_line("markers", "mlacheck_guard: guard this test's custom-op calls and Triton launches, "
                                       "with or without --mlacheck-guard")
    config.addinivalue_line("markers", "no_mlacheck_guard: never guard this test")


@_hookwrapper
def pytest_runtest_call(item):
    config = item.config
    on = config.getoption("--mlacheck-guard", False) or config.getoption("--mlacheck-guard-alloc", False) or \
        item.get_closest_marker("mlacheck_guard") is not None
    if not on or item.get_closest_marker("no_mlacheck_guard") is not None:
        return (yield)
    ns = config.getoption("--mlacheck-guard-ns", None)
    g = guard(namespaces=ns.split(",") if ns else None, save=config.getoption("--mlacheck-guard-save", "mlacheck-guard"),
              poison=config.getoption("--mlacheck-guard-poison", False),
              repeat=config.getoption("--mlacheck-guard-repeat", 1),
              scratch=[p for p in (config.getoption("--mlacheck-guard-scratch", None) or "").split(",") if p])
    state = None
    try:
        with g as state:
            return (yield)
    finally:  # counted after the block's end, which may add a finding (a freed block a graph wrote)
        if state is not None:
            _guard_totals["tests"] += 1
            _guard_totals["calls"] += state.calls
            _guard_totals["findings"] += len(state.findings)
            _guard_totals["seconds"] += state.seconds
            _guard_totals["unwatched"] += state.captured + state.traced


_guard_totals = {"tests": 0, "calls": 0, "findings": 0, "seconds": 0.0, "unwatched": 0}


@_hookwrapper
def pytest_runtest_makereport(item, call):
    # A guard's finding is reported at the test's own line: the frames of torch's dispatcher and of
    # the guard between it and the raise say nothing about the user's bug.
    from .guard import NotDeterministic as _nd, StrayWrite as _sw
    e = call.excinfo
    if e is not None and isinstance(e.value, (_sw, _nd)) and getattr(item, "path", None) is not None:
        mine = [entry for entry in e.traceback if str(entry.path) == str(item.path)]
        if mine:  # the raw traceback ends at the test file's last frame (pytest rebuilds it from there)
            mine[-1]._rawentry.tb_next = None
            e.traceback = type(e.traceback)(e.tb)
    return (yield)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not (config.getoption("--mlacheck-guard", False) or config.getoption("--mlacheck-guard-alloc", False)) \
            and _guard_totals["tests"] == 0:
        return
    t = _guard_totals
    ns = config.getoption("--mlacheck-guard-ns", None) or "every namespace but aten and prim"
    terminalreporter.write_line("mlacheck guard: %d call(s) guarded in %d test(s) (custom ops of %s, and Triton "
                                "launches%s), %d finding(s); %.2f s in the guard's checks" % (
                                    t["calls"], t["tests"], ns,
                                    "; CUDA tensors in red zones" if config.getoption("--mlacheck-guard-alloc", False)
                                    else "", t["findings"], t["seconds"]))
    if t.get("unwatched"):
        terminalreporter.write_line("mlacheck guard: %d call(s) passed unwatched: captured into a CUDA graph (nothing "
                                    "runs then) or traced by torch.compile (tensors without bytes)" % t["unwatched"])
    if t["tests"] > 0 and t["calls"] == 0:
        terminalreporter.write_line("mlacheck guard: NO RUN: no guarded test called a custom op of those namespaces or "
                                    "launched a Triton kernel, so nothing was checked (--mlacheck-guard-ns picks "
                                    "others)", red=True)


def _optional_hook(f):
    try:
        return _pytest.hookimpl(optionalhook=True)(f)
    except NameError:  # no pytest
        return f


@_optional_hook
def pytest_testnodedown(node, error):
    # pytest-xdist's controller: each worker's totals (pytest_sessionfinish put them in its output).
    got = getattr(node, "workeroutput", {}).get("mlacheck_guard")
    for k, v in (got or {}).items():
        _guard_totals[k] = _guard_totals.get(k, 0) + v


def pytest_sessionfinish(session, exitstatus):
    out = getattr(session.config, "workeroutput", None)
    if out is not None:  # a pytest-xdist worker: its controller adds the totals up and reports them
        out["mlacheck_guard"] = dict(_guard_totals)
        return
    # A guarded session that guarded no call checked nothing: never a clean exit.
    if (session.config.getoption("--mlacheck-guard", False) or session.config.getoption("--mlacheck-guard-alloc", False)) \
            and _guard_totals["tests"] > 0 \
            and _guard_totals["calls"] == 0 and exitstatus == 0:
        session.exitstatus = 1
