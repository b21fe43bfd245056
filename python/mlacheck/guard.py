"""mlacheck.guard(): every custom-op call and Triton launch of this process checked against its views.

    import mlacheck
    with mlacheck.guard():                      # or: pytest -p mlacheck --mlacheck-guard
        my_test_body()

Inside the block, each Python call of a custom op (torch.ops.<ns>.<op> or .<op>.<overload>, which
is also how torch.library.custom_op functions and torch.compile's generated code call them; <ns>
matching the namespace patterns: by default every namespace but aten and prim) and each Triton launch
(JITFunction.run, and InterpretedFunction.run under TRITON_INTERPRET=1) runs between an arm and a
check of every tensor argument's storage: the bytes outside the views passed in that call, and the
views an op's schema does not mark as written (no `(a!)`), must come back unchanged. A change is
raised as StrayWrite (an AssertionError, so a pytest test fails) with the call, the argument, its
dtype, shape, strides and storage offset, the first changed element's row and column and how many
bytes changed, and the call is saved (every storage as it was before the call, the views, the
scalars) for `mlacheck repro FILE --python MODULE` (or
`python -m mlacheck.rerun FILE --import MODULE`) to rerun alone. A Triton kernel has no schema: every
tensor it is given may be written, and only the bytes outside its views are watched.

The byte work (arm, checksum, compare, the report's coordinates) is mlacheck's C++
(core/storage_watch.h) in libmlacheck_guard.so, loaded here with ctypes: $MLACHECK_GUARD_LIB, else
the one installed beside this file, else the mlacheck executable's build's core/. CUDA tensors are
watched on their device by the library's kernels where it was built with nvcc; a tensor on another
device (or on CUDA with a library built without it) is refused with one line (docs/guard.md).
"""
import contextlib
import ctypes
import fnmatch
import os
import sys
import threading
import time

__all__ = ["guard", "StrayWrite", "NotDeterministic", "replay", "install_allocator"]


class StrayWrite(AssertionError):
    """A guarded call changed bytes it was not given to write. .call_file: the saved call."""

    def __init__(self, message, call_file=None):
        AssertionError.__init__(self, message)
        self.call_file = call_file


_lib = None
_ERR = 512


def _library():
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    env = os.environ.get("MLACHECK_GUARD_LIB")
    if env:
        tried.append(env)
    else:
        tried.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "libmlacheck_guard.so"))  # installed
        from . import binary
        try:
            exe = os.path.realpath(binary())
            build = os.path.dirname(os.path.dirname(exe))
            tried.append(os.path.join(build, "core", "libmlacheck_guard.so"))  # the executable's build
            tried.append(os.path.join(build, "share", "mlacheck", "python", "mlacheck", "libmlacheck_guard.so"))  # its prefix
        except RuntimeError:
            pass
    for path in tried:
        if os.path.exists(path):
            lib = ctypes.CDLL(path)
            break
    else:
        raise RuntimeError("mlacheck guard: no libmlacheck_guard.so (looked at %s; set MLACHECK_GUARD_LIB to the one "
                           "your mlacheck build made: <build>/core/libmlacheck_guard.so)" % (", ".join(tried) or "nothing"))
    i64, p = ctypes.c_int64, ctypes.c_void_p
    lib.mlacheck_watch_new.argtypes = [ctypes.c_size_t, i64, i64, ctypes.c_int, ctypes.POINTER(p), ctypes.c_char_p, i64]
    lib.mlacheck_watch_has_cuda.argtypes = []
    lib.mlacheck_watch_free.argtypes = [p]
    lib.mlacheck_watch_free.restype = None
    lib.mlacheck_watch_add_view.argtypes = [p, ctypes.c_char_p, i64, i64, ctypes.POINTER(i64), ctypes.POINTER(i64), i64,
                                            ctypes.c_int, ctypes.c_char_p, i64]
    lib.mlacheck_watch_arm.argtypes = [p, ctypes.c_char_p, i64]
    lib.mlacheck_watch_check.argtypes = [p, ctypes.POINTER(i64), ctypes.POINTER(i64), ctypes.POINTER(i64),
                                         ctypes.POINTER(ctypes.c_int), ctypes.POINTER(i64), ctypes.c_char_p, i64,
                                         ctypes.c_char_p, i64]
    lib.mlacheck_watch_snapshot.argtypes = [p, ctypes.c_size_t, i64, ctypes.POINTER(i64), ctypes.c_char_p, i64]
    if lib.mlacheck_watch_has_cuda():  # the red-zone allocator (core/backend/cuda_guard_allocator.cu)
        lib.mlacheck_alloc_zones.argtypes = [ctypes.c_size_t, ctypes.POINTER(i64), ctypes.POINTER(i64),
                                             ctypes.POINTER(i64)]
        lib.mlacheck_alloc_rearm.argtypes = [ctypes.c_size_t]
        lib.mlacheck_alloc_rearm.restype = None
        lib.mlacheck_alloc_graphs.argtypes = [ctypes.c_int]
        lib.mlacheck_alloc_graphs.restype = None
        lib.mlacheck_alloc_quarantine_check.argtypes = [ctypes.POINTER(i64)] * 3
    lib.path = path
    _lib = lib
    return lib


def _ok(rc, err):
    if rc != 0:
        raise RuntimeError("mlacheck guard: " + err.value.decode(errors="replace"))


def _label(name, t):
    return "argument '%s' (%s%s, strides %s, storage offset %d)" % (
        name, t.dtype, list(t.shape), tuple(t.stride()), t.storage_offset())


def _half_the_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 1 << 62


class _Storage:
    """One storage of a call, watched by the C++ StorageWatch."""

    def __init__(self, lib, tensor, name):
        self.lib = lib
        self.storage = tensor.untyped_storage()
        self.nbytes = self.storage.nbytes()
        self.device = tensor.device
        if not tensor.is_cuda and self.nbytes > _half_the_memory():
            # Arm and check read the whole storage: a view of a sparse mapping (a huge mmap'd file, a
            # shared arena) would be paged in whole, every call.
            raise RuntimeError("mlacheck guard: %s is a view of a host storage of %.1f GiB, more than half this "
                               "machine's memory (an mmap'd file?); the guard reads a storage whole at every call, "
                               "so it watches none that large" % (_label(name, tensor), self.nbytes / 2 ** 30))
        self.handle = ctypes.c_void_p()
        self.views = []  # (name, tensor)
        self.writers = []  # those the call may write
        err = ctypes.create_string_buffer(_ERR)
        _ok(lib.mlacheck_watch_new(self.storage.data_ptr(), self.nbytes, 0, 1 if tensor.is_cuda else 0,
                                   ctypes.byref(self.handle), err, _ERR), err)

    def add(self, name, t, may_write):
        n = t.dim()
        shape = (ctypes.c_int64 * max(n, 1))(*t.shape)
        stride = (ctypes.c_int64 * max(n, 1))(*t.stride())
        err = ctypes.create_string_buffer(_ERR)
        es = t.element_size()
        _ok(self.lib.mlacheck_watch_add_view(self.handle, _label(name, t).encode(), es, n, shape, stride,
                                             t.storage_offset() * es, 1 if may_write else 0, err, _ERR), err)
        self.views.append((name, t))
        if may_write:
            self.writers.append((name, t))

    def arm(self):
        err = ctypes.create_string_buffer(_ERR)
        _ok(self.lib.mlacheck_watch_arm(self.handle, err, _ERR), err)

    def before(self):
        """The storage's bytes as armed, when the watch kept them all (else None)."""
        import torch
        out = torch.empty(self.nbytes, dtype=torch.uint8, device="cpu")  # whatever the default device
        got, err = ctypes.c_int64(0), ctypes.create_string_buffer(_ERR)
        _ok(self.lib.mlacheck_watch_snapshot(self.handle, out.data_ptr(), self.nbytes, ctypes.byref(got), err, _ERR), err)
        return out if got.value == self.nbytes else None

    def check(self):
        i64 = ctypes.c_int64
        changed, first, view, inp = i64(0), i64(0), i64(0), ctypes.c_int(0)
        coords = (i64 * 8)()
        report, err = ctypes.create_string_buffer(2048), ctypes.create_string_buffer(_ERR)
        _ok(self.lib.mlacheck_watch_check(self.handle, ctypes.byref(changed), ctypes.byref(first), ctypes.byref(view),
                                          ctypes.byref(inp), coords, report, 2048, err, _ERR), err)
        return changed.value, report.value.decode(errors="replace")

    def zones(self):
        """(bytes changed, the first's offset from the storage's start, the storage's bytes) of the red
        zones around this storage when the guard's allocator made it, else None."""
        if not (_alloc_installed and self.device.type == "cuda"):
            return None
        i64 = ctypes.c_int64
        changed, first, size = i64(0), i64(0), i64(0)
        if not self.lib.mlacheck_alloc_zones(self.storage.data_ptr(), ctypes.byref(changed), ctypes.byref(first),
                                             ctypes.byref(size)):
            return None
        return changed.value, first.value, size.value

    def zone_report(self, changed, first, size):
        """The line of a write into the red zones: the argument whose view is nearest, and the first
        stray element's coordinates as if that view went on past its end (or before its start)."""
        name, t = (self.writers or self.views)[0]  # a view the call may write is the likelier writer
        where = ("%d bytes past its end" % (first - size)) if first >= size else ("%d bytes before its start" % -first)
        return ("%s was written outside its storage (%d bytes): %d byte(s) of the guard allocator's red zones "
                "changed, the first %s, at element %s as if the view went on" %
                (_label(name, t), size, changed, where, _as_if(t, first)))

    def close(self):
        if self.handle:
            self.lib.mlacheck_watch_free(self.handle)
            self.handle = ctypes.c_void_p()


def _tensors(value, name, out):
    """(name, tensor) of value, a tensor or a list/tuple of them."""
    import torch
    if isinstance(value, torch.Tensor):
        out.append((name, value))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if isinstance(v, torch.Tensor):
                out.append(("%s[%d]" % (name, i), v))
    return out


def _traced(t):
    """Whether t is a tensor subclass with a __torch_dispatch__ of its own (torch.compile's fake and
    functional tensors, wrappers): its storage holds no bytes of its own to watch. A plain subclass
    (nn.Parameter, a user's) is watched as a tensor is."""
    import torch
    return getattr(type(t), "__torch_dispatch__", None) is not getattr(torch.Tensor, "__torch_dispatch__", None)


class _Guard:
    def __init__(self, namespaces, triton, save):
        self.namespaces = list(namespaces) if namespaces else None
        self.triton = triton
        self.save = save
        self.calls = 0
        self.captured = 0  # calls captured into a CUDA graph, not watched
        self.traced = 0  # calls on tensor subclasses (torch.compile tracing), not watched
        self.repeats = 0  # the runs repeat=N added, compared with their first
        self.scratch = []  # argument patterns an op may write though its schema says it reads them
        self.seconds = 0.0  # the guard's own time around the calls (arm, check, red zones, saving)
        self.call_seconds_last = 0.0
        self.findings = []
        self.busy = threading.local()
        self.chosen = {}  # op object -> watched (picks)

    def picks(self, op):
        """Whether op (an OpOverload or OpOverloadPacket) is one this guard watches: by its namespace."""
        chosen = self.chosen.get(op)
        if chosen is None:
            name = getattr(op, "_qualified_op_name", None) or op._schema.name
            chosen = self.chosen[op] = self.selects(name.partition("::")[0])
        return chosen

    def selects(self, ns):
        if self.namespaces is None:
            return ns not in ("aten", "prim", "prims", "_ops")
        return any(fnmatch.fnmatchcase(ns, p) for p in self.namespaces)

    def watch(self, what, kind, named, call, replay_info):
        """Runs call() with every storage of named [(name, tensor, may_write)] armed before and checked after."""
        if getattr(self.busy, "on", False):  # a guarded call inside a guarded call: the outer one watches
            return call()
        if any(t.is_cuda for _, t, _ in named):
            import torch
            if torch.cuda.is_current_stream_capturing():
                # Captured into a CUDA graph: nothing runs now, so there is nothing to compare (a wait
                # for the device would also end the capture). Its replays are not watched; what they
                # write into memory freed meanwhile the red-zone allocator's quarantine finds.
                self.captured += 1
                return self._unwatched(call)
        started = time.perf_counter()
        try:
            return self._watch(what, kind, named, call, replay_info)
        finally:
            self.seconds += time.perf_counter() - started - self.call_seconds_last

    def _unwatched(self, call):
        self.busy.on = True  # what the call itself calls is not watched either
        try:
            return call()
        finally:
            self.busy.on = False

    def _watch(self, what, kind, named, call, replay_info):
        self.call_seconds_last = 0.0
        lib = _library()
        for name, t, _ in named:
            if t.device.type == "cpu" or (t.device.type == "cuda" and lib.mlacheck_watch_has_cuda()):
                continue
            raise RuntimeError("mlacheck guard: %s: %s is on %s; the guard watches host (CPU) tensors%s (docs/guard.md)"
                               % (what, _label(name, t), t.device,
                                  " and CUDA ones" if lib.mlacheck_watch_has_cuda() else
                                  ", and CUDA ones only with a libmlacheck_guard.so built with nvcc"))
        storages = {}
        try:
            for name, t, may_write in named:
                s = t.untyped_storage()
                if s.nbytes() == 0 or s.data_ptr() == 0:
                    continue
                key = s.data_ptr()
                if key not in storages:
                    storages[key] = _Storage(lib, t, name)
                storages[key].add(name, t, may_write)
            for s in storages.values():
                s.arm()
            self.busy.on = True
            began = time.perf_counter()
            try:
                result = call()
            finally:
                self.busy.on = False
                self.call_seconds_last = time.perf_counter() - began
            self.calls += 1
            bad, dirty = [], set()
            for key, s in storages.items():
                changed, report = s.check()
                if changed:
                    bad.append(report)
                    dirty.add(key)
                z = s.zones()
                if z is not None and z[0]:
                    bad.append(s.zone_report(*z))
                    _lib.mlacheck_alloc_rearm(s.storage.data_ptr())  # the next call is judged on its own
            if bad:
                message = "mlacheck guard: %s (%s): %s" % (what, kind, bad[0])
                if len(bad) > 1:
                    message += "; and in %d more storage(s) of the call" % (len(bad) - 1)
                path, why = self._save(what, kind, storages, named, replay_info, message, dirty)
                if path:
                    message += ("; the call saved as %s (rerun it alone: mlacheck repro %s --python MODULE, MODULE what "
                                "registers the op)" % (path, path))
                    if why:
                        message += "; " + why
                elif why:
                    message += "; the call was not saved: " + why
                self.findings.append(message)
                raise StrayWrite(message, path)
            return result
        finally:
            for s in storages.values():
                s.close()

    def _save(self, what, kind, storages, named, replay_info, message, dirty=()):
        if not self.save:
            return None, None
        if replay_info is None:
            return None, "its grid is a callable that did not evaluate on the launch's arguments"
        import torch
        before, after = {}, []
        for i, (key, s) in enumerate(storages.items()):
            b = s.before()
            if b is None and key in dirty:  # its stray bytes are in it now, and its old bytes are not kept
                return None, "a storage of %d bytes, past the 16 MiB the watch keeps whole" % s.nbytes
            if b is None:
                # The watch kept only checksums of part of it (past 16 MiB), and nothing outside its
                # views changed: it is saved as it is after the call. A storage the call only reads is
                # the same as before (the watch compared its views exactly); one it writes has its
                # views' new values (a red-zone write lies outside the storage).
                b = _view_on(s.storage, torch.uint8, 0, (s.nbytes,), (1,)).detach().to("cpu", copy=True)
                after.append(i)
            before[key] = b
        index = {key: i for i, key in enumerate(before)}

        def encode(v):
            if isinstance(v, torch.Tensor):
                key = v.untyped_storage().data_ptr()
                if key not in index:
                    return {"__tensor__": None, "value": v.detach().clone()}
                return {"__tensor__": index[key], "dtype": v.dtype, "shape": list(v.shape), "stride": list(v.stride()),
                        "offset": v.storage_offset()}
            if isinstance(v, (list, tuple)):
                return type(v)(encode(x) for x in v)
            if isinstance(v, dict):
                return {k: encode(x) for k, x in v.items()}
            return v

        record = dict(replay_info)
        record.update(what=what, kind=kind, message=message, storages=list(before.values()), after=after,
                      alloc=_alloc_installed,
                      devices=[str(storages[key].device) for key in before],
                      args=encode(list(replay_info["args"])), kwargs=encode(dict(replay_info["kwargs"])))
        os.makedirs(self.save, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in what)
        path = os.path.join(self.save, "%s-%d.call" % (safe, int(time.time() * 1000) % 10 ** 9))
        try:
            torch.save(record, path)
        except Exception as e:  # e.g. a scalar that does not pickle
            return None, str(e).splitlines()[0] if str(e) else type(e).__name__
        if kind == "torch.ops":
            return path, self._save_case(path, replay_info)
        return path, None

    def _save_case(self, path, replay_info):
        """Writes the call as an mlacheck case beside path when an adapter maps its op; returns a note
        for the message: where, or why not. The case takes the inputs' values and the outputs'
        layout from the call's tensors as they are now: an input the call wrote is a finding of its
        own, and an output's values are not part of a case."""
        from .adapters import guard_cases
        op = replay_info["op"]
        if op not in guard_cases.WRITERS:
            return None
        named = dict(zip(replay_info.get("names", []), replay_info["args"]))
        named.update(replay_info["kwargs"])
        text, why = guard_cases.case_of(op, named)
        if text is None:
            return "no mlacheck case of it: " + why
        case = os.path.splitext(path)[0] + ".case"
        with open(case, "w") as f:
            f.write(text)
        return "as an mlacheck case too: " + case

    # ---- custom ops -------------------------------------------------------------------------
    def op_call(self, func, args, kwargs):
        schema = func._schema
        named = []
        qualified = "%s.%s" % (func.namespace, func._opname) + \
            ("" if func._overloadname == "default" else "." + func._overloadname)
        for i, a in enumerate(schema.arguments):
            if a.kwarg_only or i >= len(args):
                if a.name not in kwargs:
                    continue
                value = kwargs[a.name]
            else:
                value = args[i]
            may_write = a.alias_info is not None and a.alias_info.is_write
            if not may_write and self.scratch and _is_scratch(self.scratch, qualified, a.name):
                may_write = True  # declared a workspace the op may write though its schema does not say so
            for name, t in _tensors(value, a.name, []):
                named.append((name, t, may_write))
        if any(_traced(t) for _, t, _ in named):
            # torch.compile tracing it (fake or functional tensors): no bytes to watch; the compiled
            # graph's own call of the op is watched when it runs.
            self.traced += 1
            return self._unwatched(lambda: func._op(*args, **kwargs))
        info = dict(op=func.name(), overload=func._overloadname, args=args, kwargs=kwargs,
                    names=[a.name for a in schema.arguments])
        as_sets = "topk" in func._opname.lower() or "top_k" in func._opname.lower()
        return self._repeated(qualified, "torch.ops", named, args, kwargs, lambda a, k: func._op(*a, **k), info, as_sets)

    def _repeated(self, what, kind, named, args, kwargs, call, info, as_sets):
        """call(args, kwargs) watched; with repeat=N, N - 1 more runs on copies of its storages as
        they were before it, every view it may write compared with the first run's, bitwise."""
        if getattr(self, "repeat", 1) <= 1:
            return self.watch(what, kind, named, lambda: call(args, kwargs), info)
        # The inputs as they are before the call, for the repeats: every storage copied once.
        import torch
        copies = {}
        for _, t, _ in named:
            key = t.untyped_storage().data_ptr()
            if key not in copies:
                copies[key] = t.untyped_storage().clone()
        result = self.watch(what, kind, named, lambda: call(args, kwargs), info)
        for run in range(2, self.repeat + 1):
            fresh = {key: s.clone() for key, s in copies.items()}

            def rebuild(v):
                if isinstance(v, torch.Tensor):
                    key = v.untyped_storage().data_ptr()
                    if key in fresh:
                        return _view_on(fresh[key], v.dtype, v.storage_offset(), v.shape, v.stride())
                    return v
                if isinstance(v, (list, tuple)):
                    return type(v)(rebuild(x) for x in v)
                return v
            args2 = [rebuild(a) for a in args]
            kwargs2 = {k: rebuild(v) for k, v in kwargs.items()}
            self.busy.on = True
            try:
                call(args2, kwargs2)
            finally:
                self.busy.on = False
            self.repeats += 1
            for name, t, may_write in named:
                if not may_write:
                    continue
                again = rebuild(t)
                first, second, sets = t, again, False
                if as_sets and not t.is_floating_point() and t.dim() >= 1:
                    # A top-k's rows are index sets, and indices of equal values are interchangeable:
                    # compare the values they pick from the op's scores (its first floating input
                    # of the rows' shape), sorted; without such an input, the indices as sets.
                    first, second, sets = _picked(t, named), _picked(again, named), True
                d = _first_difference(first, second, sets)
                if d is not None:
                    message = ("mlacheck guard: %s (%s): not deterministic: %s differs between run 1 and run "
                               "%d on the same inputs, first at index %s (%r, then %r)%s"
                               % (what, kind, _label(name, t), run, d[0], d[1], d[2],
                                  " (rows compared as the sets of scores they pick)" if sets else ""))
                    self.findings.append(message)
                    raise NotDeterministic(message)
        return result

    # ---- Triton -------------------------------------------------------------------------------
    def launch(self, jit, original, args, grid, kwargs):
        import torch
        names = list(getattr(jit, "arg_names", []))
        named = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                named.append((names[i] if i < len(names) else "arg%d" % i, a, True))
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                named.append((k, v, True))
        fn = getattr(jit, "fn", None)
        module = getattr(fn, "__module__", "?")
        name = getattr(fn, "__name__", "?")
        resolved = grid
        if callable(grid):
            try:
                meta = dict(zip(names, args))
                meta.update(kwargs)
                resolved = tuple(grid(meta))
            except Exception:
                resolved = None
        info = dict(module=module, kernel=name, grid=resolved, args=args, kwargs=kwargs,
                    source=getattr(sys.modules.get(module), "__file__", None))
        if resolved is None:
            info = None  # a grid that is not a tuple of the launch's arguments: no replay
        as_sets = "topk" in name.lower() or "top_k" in name.lower()
        # A Triton kernel has no schema: every tensor it is given may be written, and with repeat=N
        # every one is compared (an input comes out as it went in, so it always agrees).
        return self._repeated("%s.%s" % (module, name), "Triton launch", named, list(args), dict(kwargs),
                              lambda a, k: original(jit, *a, grid=grid, warmup=False, **k), info, as_sets)


_active = []
_lock = threading.Lock()


def _install_triton(g):
    """Wraps JITFunction.run (and the interpreter's run); returns how to undo it, or raises one line."""
    try:
        import triton  # noqa: F401
        from triton.runtime import jit as jit_mod
    except ImportError:
        return []
    classes = [jit_mod.JITFunction]
    try:
        from triton.runtime import interpreter as interp
        classes.append(interp.InterpretedFunction)
    except ImportError:
        pass
    undo = []
    for cls in classes:
        original = cls.__dict__.get("run")
        if original is None:
            raise RuntimeError("mlacheck guard: this Triton (%s) has no %s.run to watch launches through"
                               % (getattr(sys.modules.get("triton"), "__version__", "?"), cls.__name__))

        def run(self, *args, grid, warmup, _original=original, **kwargs):
            if warmup or not _active:
                return _original(self, *args, grid=grid, warmup=warmup, **kwargs)
            return _active[-1].launch(self, _original, args, grid, kwargs)

        cls.run = run
        undo.append((cls, "run", original))
    return undo


def _undo(undo):
    for cls, attr, original in reversed(undo):
        setattr(cls, attr, original)


def _install_ops():
    """Wraps the __call__ of torch's op objects (OpOverload: torch.ops.ns.op.overload, and
    OpOverloadPacket: torch.ops.ns.op), so each Python call of an op the active guard selects is
    watched; every other call (aten's, and any call while the guard is busy) goes straight on. Only
    op calls pay: the test's own tensor arithmetic never passes through Python (a dispatch mode made
    every aten op do so, 6x on a test's row loops). Returns how to undo it, or raises one line."""
    import torch
    from torch import _ops
    resolve = getattr(torch._C, "_jit_resolve_packet", None)
    overload_call = _ops.OpOverload.__dict__.get("__call__")
    packet_call = _ops.OpOverloadPacket.__dict__.get("__call__")
    if resolve is None or overload_call is None or packet_call is None:
        raise RuntimeError("mlacheck guard: torch %s has no %s to see op calls through" % (
            torch.__version__, "torch._C._jit_resolve_packet" if resolve is None else "OpOverload.__call__"))

    def guarded_overload(self, /, *args, **kwargs):
        g = _active[-1] if _active else None
        if g is None or not g.picks(self) or getattr(g.busy, "on", False):
            return overload_call(self, *args, **kwargs)
        return g.op_call(self, args, kwargs)

    def guarded_packet(self, /, *args, **kwargs):
        g = _active[-1] if _active else None
        if g is None or not g.picks(self) or getattr(g.busy, "on", False):
            return packet_call(self, *args, **kwargs)
        # The overload torch would pick for these arguments (as the packet's own call does, in C++).
        overload = resolve(self._qualified_op_name, *args, **kwargs)
        return g.op_call(getattr(self, overload or "default"), args, kwargs)

    _ops.OpOverload.__call__ = guarded_overload
    _ops.OpOverloadPacket.__call__ = guarded_packet
    return [(_ops.OpOverload, "__call__", overload_call), (_ops.OpOverloadPacket, "__call__", packet_call)]


class NotDeterministic(AssertionError):
    """A guarded call gave different results on the same inputs (guard(repeat=N))."""


def _view_on(storage, dtype, offset, shape, stride):
    """A tensor of dtype, shape, stride and storage offset (in elements) on an untyped storage."""
    import torch
    return torch.empty(0, dtype=dtype, device=storage.device).set_(storage, offset, shape, stride)


def _is_scratch(patterns, qualified, arg):
    """Whether argument arg of op qualified (ns.op) is declared scratch: a pattern NAME matches the
    argument of any op, OP:NAME that of the ops OP matches (fnmatch both)."""
    for p in patterns:
        op, _, name = p.rpartition(":")
        if fnmatch.fnmatchcase(arg, name) and (not op or fnmatch.fnmatchcase(qualified, op)):
            return True
    return False


def _as_if(t, byte):
    """The coordinates of the element at byte (from the start of t's storage; negative: before it)
    as if t's view went on past its end: each dimension, largest stride first, takes what it can."""
    e = byte // t.element_size() - t.storage_offset()
    idx = [0] * t.dim()
    for d in sorted(range(t.dim()), key=lambda d: -t.stride(d)):
        if t.stride(d) > 0:
            idx[d], e = e // t.stride(d), e % t.stride(d)
    return "[%s]" % ", ".join(str(i) for i in idx)


_alloc_installed = False


def install_allocator():
    """Makes the guard's red-zone allocator (core/backend/cuda_guard_allocator.cu) torch's CUDA
    allocator for the rest of this process: every CUDA tensor gets red zones before and after it,
    checked after each guarded call that is given it, and blocks freed while a captured graph lives
    are quarantined. It must come before the process's first CUDA allocation (torch allows no
    change after that): `pytest --mlacheck-guard-alloc` installs it at start."""
    global _alloc_installed
    if _alloc_installed:
        return
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("mlacheck guard: the red-zone allocator (alloc=True, --mlacheck-guard-alloc) guards CUDA "
                           "tensors, and torch %s sees no CUDA device here" % torch.__version__)
    lib = _library()
    if not lib.mlacheck_watch_has_cuda():
        raise RuntimeError("mlacheck guard: the red-zone allocator needs a libmlacheck_guard.so built with nvcc; %s "
                           "was built without it" % lib.path)
    try:
        allocator = torch.cuda.memory.CUDAPluggableAllocator(lib.path, "mlacheck_alloc", "mlacheck_free")
        torch.cuda.memory.change_current_allocator(allocator)
    except (RuntimeError, AttributeError) as e:
        raise RuntimeError("mlacheck guard: the red-zone allocator could not replace torch's (%s): it must come before "
                           "the process's first CUDA allocation; with pytest give --mlacheck-guard-alloc (installed at "
                           "start), else call mlacheck.guard(alloc=True) before any tensor is made on the GPU"
                           % (str(e).splitlines()[0] if str(e) else type(e).__name__))
    _count_graphs(torch, lib)
    _alloc_installed = True


def _count_graphs(torch, lib):
    """Tells the allocator how many captured CUDA graphs live (CUDAGraph.capture_begin to the graph's
    reset or end), so a block freed meanwhile is quarantined, not reused."""
    import weakref
    cls = torch.cuda.CUDAGraph
    begin, reset = cls.capture_begin, cls.reset
    alive = set()

    def gone(key):
        if key in alive:
            alive.discard(key)
            lib.mlacheck_alloc_graphs(-1)

    def capture_begin(self, *args, **kwargs):
        key = id(self)
        if key not in alive:
            alive.add(key)
            lib.mlacheck_alloc_graphs(1)
            try:
                weakref.finalize(self, gone, key)
            except TypeError:  # not weakly referable: counted until reset
                pass
        return begin(self, *args, **kwargs)

    def reset_(self, *args, **kwargs):
        out = reset(self, *args, **kwargs)
        gone(id(self))
        return out

    cls.capture_begin, cls.reset = capture_begin, reset_


def _quarantine_finding():
    """A line when a block freed while a captured graph lived was written after its free, else None."""
    if not _alloc_installed:
        return None
    i64 = ctypes.c_int64
    n, size, offset = i64(0), i64(0), i64(0)
    written = _lib.mlacheck_alloc_quarantine_check(ctypes.byref(n), ctypes.byref(size), ctypes.byref(offset))
    if not written:
        return None
    return ("mlacheck guard: %d block(s) freed while a captured CUDA graph lived were written after their free (a "
            "replay writes memory its capture freed): the first, of a tensor of %d bytes, %d byte(s) changed, the "
            "first at byte %d of it" % (written, size.value, n.value, offset.value))


def _poisoned(t):
    """t (fresh from an empty) filled with NaN, or bytes 0xA5 for an integer dtype."""
    import torch
    if t.numel() == 0 or t.dtype == torch.bool:
        return t
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    else:
        _view_on(t.untyped_storage(), torch.uint8, 0, (t.untyped_storage().nbytes(),), (1,)).fill_(0xA5)
    return t


def _picked(idx, named):
    """The scores a top-k's index rows pick (idx < 0: padding, -inf), from the call's first read-only
    floating tensor whose rows match idx's; idx itself where there is none."""
    import torch
    for _, t, may_write in named:
        if not may_write and t.is_floating_point() and t.dim() == idx.dim() and t.shape[:-1] == idx.shape[:-1]:
            picked = torch.gather(t, -1, idx.long().clamp(min=0, max=t.shape[-1] - 1))
            return picked.masked_fill(idx < 0, float("-inf"))
    return idx


def _first_difference(a, b, as_sets):
    """None when a and b (tensors of one shape) are bitwise equal (rows as sorted sets when as_sets),
    else (index, a value, b value) of the first element that differs."""
    import torch
    if as_sets and a.dim() >= 1:
        a, b = torch.sort(a, dim=-1).values, torch.sort(b, dim=-1).values
    # Element by element, as bytes: NaNs with the same bits are equal, -0.0 and 0.0 are not.
    x = a.reshape(-1).contiguous().view(torch.uint8).reshape(a.numel(), -1)
    y = b.reshape(-1).contiguous().view(torch.uint8).reshape(b.numel(), -1)
    differs = torch.nonzero((x != y).any(dim=1))
    if differs.numel() == 0:
        return None
    flat = int(differs[0, 0])
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat, device="cpu"), a.shape)] if a.dim() else []
    return index, a.reshape(-1)[flat].item(), b.reshape(-1)[flat].item()


@contextlib.contextmanager
def guard(namespaces=None, triton=True, save="mlacheck-guard", poison=False, repeat=1, alloc=False, scratch=()):
    """Guards every custom-op call (namespaces: fnmatch patterns, default every namespace but aten
    and prim) and, with triton, every Triton launch in the block; raises StrayWrite at the first call
    that changes bytes it was not given to write. save: where a failing call is written (None: not).
    poison: every tensor torch.empty (and empty_like, empty_strided, new_empty) makes in the block is
    filled with NaN (floating dtypes) or bytes 0xA5 (integers), so an element a kernel never wrote is
    visible to the test's own assertions. repeat (at least 2): each custom-op call and Triton launch
    runs that many times in all, the repeats on copies of its storages as they were before it, and
    the views it may write (a Triton kernel's: every tensor) must come out bitwise the same (a top-k's integer rows, op names with "topk" or "top_k", as sets); a difference
    is raised as NotDeterministic. alloc: the red-zone allocator (install_allocator) is made torch's
    CUDA allocator first, which must come before the process's first CUDA allocation; the guard uses
    it whenever it is installed, and at the block's end a block freed while a captured graph lived
    that was written after its free is raised as StrayWrite. scratch: arguments an op may write though
    its schema marks them read-only (a workspace): NAME for that argument of every op, OP:NAME for
    the ops OP matches (ns.op, fnmatch), e.g. "_C.*topk:workspace"; the op's schema is wrong there
    (torch.compile takes it at its word), and this says you know."""
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError("mlacheck guard: repeat=%r; give a whole number of runs, at least 1" % (repeat,))
    import torch
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        raise RuntimeError("mlacheck guard: torch %s has no TorchDispatchMode (torch.utils._python_dispatch): the "
                           "guard poisons empties through it" % torch.__version__)
    if alloc:
        install_allocator()
    if isinstance(scratch, str):
        scratch = [scratch]
    for p in scratch:
        if not isinstance(p, str) or not p.rpartition(":")[2]:
            raise ValueError("mlacheck guard: scratch=%r: give argument names, NAME or OP:NAME (e.g. '_C.*topk:workspace')"
                             % (p,))
    g = _Guard(namespaces, triton, save)
    g.repeat = repeat
    g.scratch = list(scratch)
    empties = set()
    if poison:
        aten = torch.ops.aten
        for packet, overloads in ((aten.empty, ("memory_format",)), (aten.empty_like, ("default",)),
                                  (aten.empty_strided, ("default",)), (aten.new_empty, ("default",)),
                                  (aten.new_empty_strided, ("default",))):
            for o in overloads:
                if hasattr(packet, o):
                    empties.add(getattr(packet, o))

    class _Poison(TorchDispatchMode):
        # Only with poison: every aten op of the block passes through here (the empties are filled).
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in empties:
                return _poisoned(func(*args, **kwargs))
            return func(*args, **kwargs)

    with _lock:
        undo = _install_ops()
        try:
            undo += _install_triton(g) if triton else []
        except Exception:
            _undo(undo)
            raise
        _active.append(g)
    try:
        with (_Poison() if poison else contextlib.nullcontext()):
            yield g
    finally:
        with _lock:
            _active.remove(g)
            _undo(undo)
    line = _quarantine_finding()
    if line:
        g.findings.append(line)
        raise StrayWrite(line)


# ---- replay: python -m mlacheck.rerun FILE [--import MODULE]... (mlacheck repro FILE runs it) ----------


def replay(path, imports=()):
    """Reruns a saved call alone under the guard: None when clean, else the StrayWrite's line."""
    import importlib
    import torch
    rec = torch.load(path, weights_only=False)
    if rec.get("alloc"):  # saved under the red-zone allocator: rerun under it (before any CUDA tensor)
        install_allocator()
    for m in imports:
        if m.endswith(".py") or os.sep in m:
            import importlib.util
            spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(m))[0], m)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            spec.loader.exec_module(mod)
        else:
            importlib.import_module(m)
    devices = rec.get("devices") or ["cpu"] * len(rec["storages"])
    storages = [s.to(d) for s, d in zip(rec["storages"], devices)]

    def decode(v):
        if isinstance(v, dict) and "__tensor__" in v:
            if v["__tensor__"] is None:
                return v["value"]
            return _view_on(storages[v["__tensor__"]].untyped_storage(), v["dtype"], v["offset"], v["shape"],
                            v["stride"])
        if isinstance(v, (list, tuple)):
            return type(v)(decode(x) for x in v)
        if isinstance(v, dict):
            return {k: decode(x) for k, x in v.items()}
        return v

    args, kwargs = decode(rec["args"]), decode(rec["kwargs"])
    with guard(save=None):
        try:
            if rec["kind"] == "torch.ops":
                ns, name = rec["op"].split("::", 1)
                packet = getattr(getattr(torch.ops, ns), name)
                getattr(packet, rec["overload"])(*args, **kwargs)
            else:
                mod = sys.modules.get(rec["module"])
                if mod is None and rec.get("source"):
                    import importlib.util
                    spec = importlib.util.spec_from_file_location(rec["module"], rec["source"])
                    mod = importlib.util.module_from_spec(spec)
                    sys.modules[rec["module"]] = mod
                    spec.loader.exec_module(mod)
                if mod is None:
                    mod = importlib.import_module(rec["module"])
                getattr(mod, rec["kernel"])[tuple(rec["grid"])](*args, **kwargs)
        except StrayWrite as e:
            return str(e)
    return None


def _emit_pytest(call_file, imports, out):
    """A pytest file of one test that reruns the saved call under the guard and fails with its line."""
    import torch
    rec = torch.load(call_file, weights_only=False)
    name = "".join(c if c.isalnum() else "_" for c in rec.get("what", "call"))
    text = '''"""Reruns the call mlacheck.guard() saved in %(file)s, alone, under the guard:
%(message)s
Written by `mlacheck repro --emit pytest:...`; needs the mlacheck package (PYTHONPATH) and its
libmlacheck_guard.so (docs/guard.md)."""
from mlacheck.guard import replay

CALL = %(file)r
IMPORTS = %(imports)r


def test_%(name)s_keeps_to_its_views():
    line = replay(CALL, IMPORTS)
    assert line is None, line
''' % dict(file=call_file, imports=list(imports), name=name,
           message="\n".join("    " + l for l in _wrap(rec.get("message", "").split("; the call saved as")[0])))
    with open(out, "w") as f:
        f.write(text)


def _wrap(s, width=96):
    import textwrap
    return textwrap.wrap(s, width) or [""]


def _main(argv):
    import argparse
    p = argparse.ArgumentParser(prog="python -m mlacheck.rerun",
                                description="Reruns a call the guard saved, alone, under the guard.")
    p.add_argument("file")
    p.add_argument("--import", dest="imports", action="append", default=[],
                   help="a module (or .py file) that registers the op; repeatable")
    p.add_argument("--emit-pytest", metavar="OUT", help="write a standalone pytest file that reruns the call, and "
                                                             "run nothing")
    a = p.parse_args(argv)
    if not os.path.exists(a.file):
        sys.stderr.write("mlacheck guard: no file '%s'\n" % a.file)
        return 2
    if a.emit_pytest:
        _emit_pytest(os.path.abspath(a.file), [os.path.abspath(m) if os.path.exists(m) else m for m in a.imports],
                     a.emit_pytest)
        print("mlacheck guard: wrote %s (pytest %s reruns the call; it fails while the bug is there)"
              % (a.emit_pytest, a.emit_pytest))
        return 0
    try:
        line = replay(a.file, a.imports)
    except (RuntimeError, AttributeError, ImportError, KeyError) as e:
        sys.stderr.write("mlacheck guard: cannot replay %s: %s (give --import, or mlacheck repro's --python, the module "
                         "that registers the op)\n" % (a.file, str(e).splitlines()[0] if str(e) else e))
        return 2
    if line:
        print(line.split("; the call saved as")[0])
        return 1
    print("mlacheck guard: %s: clean (no byte outside the call's views changed)" % a.file)
    return 0


