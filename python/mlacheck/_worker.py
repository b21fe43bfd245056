"""mlacheck's Python worker: runs a user's Python callable for the mlacheck executable.

The executable (kernels/python_bridge.cpp) starts this file with `PYTHON -c <this file> FD`, FD one end
of a Unix socket. It does not import the mlacheck package and needs nothing but the standard library
and torch, so it runs under whichever Python the user's torch lives in (docs/python.md).

The executable keeps every buffer; this process only lends them to the callable as torch tensors
that alias the same memory (no copy), so a stray write lands in mlacheck's guards:
- host: the guarded buffers live in one shared memory file (memfd), passed once over the socket and
  mapped here; a tensor is an as_strided view of it.
- cuda: each guarded buffer is a cudaMalloc allocation exported with cudaIpcGetMemHandle, opened
  here with the driver's cuIpcOpenMemHandle (ctypes on libcuda), and viewed through
  __cuda_array_interface__.

Messages: to this process, a 4-byte little-endian length and a JSON object (file descriptors ride on
the first byte); back, a 4-byte length and lines of text:
    ok                                  then the values asked for, one per line:
    int NAME VALUE | real NAME VALUE | ints NAME N V1 .. VN | none NAME
    tensor NAME BLOCK OFFSET DTYPE RANK SHAPE.. STRIDES..
    fail ONE LINE                       the callable refused, raised or misbehaved
    crashed FAULT ONE LINE              a CUDA fault that lost this process's context (it exits)
"""
import faulthandler
import importlib
import inspect
import json
import mmap
import os
import socket
import struct
import sys
import traceback
import types

# mlacheck's dtype codes (include/mlacheck/plugin.h) and their torch dtypes, filled once torch imports.
DTYPE_NAMES = ("float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "uint8", "int64", "int32",
               "uint8")
ELEMENT_BYTES = (8, 4, 2, 2, 1, 1, 1, 8, 4, 1)
# The ops a Python function can stand in for; the package's mlacheck.OPS is this tuple.
OPS = ("topk_decode", "topk_prefill", "paged_mqa_logits", "mqa_logits", "pack_decode", "unpack_decode",
       "topk_to_global", "sparse_mla_decode", "mla_decode", "indexer_k_cache_insert", "indexer_k_cache_gather",
       "decode_metadata", "mla_decode_impl", "indexer_decode_step")


def one_line(text, limit=600):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def describe(exc):
    """'ValueError: message (at file.py:12 in fn)' for a raised exception."""
    what = "%s: %s" % (type(exc).__name__, exc)
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if f.filename != "<string>"] or frames
    if user:
        f = user[-1]
        what += " (at %s:%d in %s)" % (f.filename, f.lineno, f.name)
    return one_line(what)


class Refusal(Exception):
    """A misuse to report as the callable's failure (a wrong return, a foreign tensor)."""


class CudaFault(Exception):
    """The CUDA context of this process is lost."""


def missing_parameter(fn, names, positional=0):
    """The first parameter of fn (past the positional ones) with no default that names does not
    hold, or None (fn takes **kwargs, or its signature cannot be read)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return None
    for p in list(params.values())[positional:]:
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in names:
            return p.name
    return None


def call_with(fn, what, args, positional=()):
    """fn(*positional, **the args its signature takes); Refusal for a parameter that is no argument."""
    missing = missing_parameter(fn, args, len(positional))
    if missing is not None:
        raise Refusal("%s takes '%s', which is not an argument mlacheck passes (it passes: %s)"
                      % (what, missing, ", ".join(args)))
    try:
        params = inspect.signature(fn).parameters
        takes_all = any(p.kind == p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        params, takes_all = {}, True
    kwargs = dict(args) if takes_all else {k: v for k, v in args.items() if k in params}
    return fn(*positional, **kwargs)


class Cuda:
    """The driver calls that open another process's allocations (libcuda through ctypes)."""

    def __init__(self, torch, device):
        import ctypes
        self.ctypes = ctypes
        torch.cuda.set_device(device)
        torch.empty(1, device="cuda")  # the primary context, current on this thread
        self.lib = ctypes.CDLL("libcuda.so.1")

        class Handle(ctypes.Structure):
            _fields_ = [("reserved", ctypes.c_char * 64)]

        self.Handle = Handle
        self.open_fn = getattr(self.lib, "cuIpcOpenMemHandle_v2", None) or self.lib.cuIpcOpenMemHandle
        self.open_fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), Handle, ctypes.c_uint]
        self.close_fn = self.lib.cuIpcCloseMemHandle
        self.close_fn.argtypes = [ctypes.c_uint64]

    def open(self, hex_handle):
        h = self.Handle()
        data = bytes.fromhex(hex_handle)
        self.ctypes.memmove(self.ctypes.addressof(h), data, len(data))  # (a c_char field stops at a NUL)
        ptr = self.ctypes.c_uint64(0)
        rc = self.open_fn(self.ctypes.byref(ptr), h, 1)  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
        if rc != 0:
            raise RuntimeError("cuIpcOpenMemHandle failed with CUresult %d" % rc)
        return ptr.value

    def close(self, ptr):
        self.close_fn(ptr)


class CudaBytes:
    """bytes of device memory at ptr, for torch.as_tensor through __cuda_array_interface__."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 2,
                                         "strides": None}


class Worker:
    def __init__(self, sock):
        self.sock = sock
        self.torch = None
        self.cuda = None
        self.backend = "host"
        self.fns = {}       # op -> the callable
        self.blocks = {}    # block id -> (local address, bytes, uint8 tensor over it, cuda ptr to close or None)
        self.maps = {}      # block id -> the host arena's mmap
        self.buffers = {}   # (block, offset, bytes) -> a uint8 tensor over that guarded buffer of the arena
        self.objects = {}   # object id -> a stateful object (a builder, an impl, a step) or a captured graph
        self.next_object = 1

    # ---- the socket ----------------------------------------------------------------------------
    def receive(self):
        """The next request, or (None, []) when the process that sends them has gone: an end of
        file, or a reset (it exited with our last reply unread: a budget that ended at that moment;
        found by a CI run of mlacheck.cases under load)."""
        header, fds = b"", []
        try:
            while len(header) < 4:
                data, got, _, _ = socket.recv_fds(self.sock, 4 - len(header), 8)
                if not data:
                    return None, []
                header += data
                fds += got
            (n,) = struct.unpack("<I", header)
            body = bytearray()
            while len(body) < n:
                chunk = self.sock.recv(min(1 << 20, n - len(body)))
                if not chunk:
                    return None, []
                body += chunk
        except ConnectionResetError:
            return None, []
        return json.loads(body.decode("utf-8")), fds

    def send(self, lines, msg=None):
        """A reply; it ends with the request's sequence number, by which the executable knows a reply
        to a request of a process it killed (mlacheck.cases() serves every process of a run)."""
        if msg is not None and "seq" in msg:
            lines = list(lines) + ["seq %d" % msg["seq"]]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        self.sock.sendall(struct.pack("<I", len(data)) + data)

    # ---- memory ----------------------------------------------------------------------------------
    def open_blocks(self, msg, fds):
        for b in msg.get("drop", []):
            entry = self.blocks.pop(b, None)
            if entry is not None and entry[3] is not None:
                self.cuda.close(entry[3])
        for b in msg.get("blocks", []):
            if b["id"] in self.blocks:
                continue
            if "fd" in b:  # the host arena: one shared memory file
                fd = fds[b["fd"]]
                mm = mmap.mmap(fd, b["bytes"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                os.close(fd)
                t = self.torch.frombuffer(mm, dtype=self.torch.uint8)
                self.blocks[b["id"]] = (t.data_ptr(), b["bytes"], t, None)
                self.maps[b["id"]] = mm
            else:
                ptr = self.cuda.open(b["ipc"])
                t = self.torch.as_tensor(CudaBytes(ptr, b["bytes"]), device="cuda")
                self.blocks[b["id"]] = (ptr, b["bytes"], t, ptr)

    def tensor(self, d):
        if d is None:
            return None
        block, offset, dtype, shape, strides = d[:5]
        base = self.blocks[block][2]
        if len(d) == 7:  # on the host: the guarded buffer's own extent in the arena, as a storage of its own
            start, size = d[5], d[6]
            key = (block, start, size)
            if key not in self.buffers:
                if len(self.buffers) >= 4096:
                    self.buffers.clear()
                self.buffers[key] = self.torch.frombuffer(memoryview(self.maps[block])[start:start + size],
                                                          dtype=self.torch.uint8)
            base, offset = self.buffers[key], offset - start
        es = ELEMENT_BYTES[dtype]
        if offset % es:
            raise Refusal("a view at byte %d is not aligned to its %d-byte elements" % (offset, es))
        typed = base[: base.numel() // es * es].view(self.dtypes[dtype]) if es > 1 else base.view(self.dtypes[dtype])
        return self.torch.as_strided(typed, shape, strides, offset // es)

    def where(self, t, name):
        """(block, byte offset) of a tensor the callable returned: it must be a view of lent memory."""
        ptr = t.data_ptr()
        if t.numel() == 0:  # torch gives an empty tensor data_ptr() 0: where it would start instead
            storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
            ptr = storage.data_ptr() + t.storage_offset() * t.element_size()
        for b, (addr, n, _, _) in self.blocks.items():
            if addr <= ptr < addr + n or (ptr == addr + n and t.numel() == 0):
                return b, ptr - addr
        raise Refusal("returned %s, a tensor in memory mlacheck did not lend (a view of a lent buffer is expected)" % name)

    def decode(self, value):
        """The arguments: {"t": [...]} is a tensor, {"ns": {...}} a namespace, lists and numbers as they are."""
        if isinstance(value, dict):
            if "t" in value:
                return self.tensor(value["t"])
            if "ns" in value:
                return types.SimpleNamespace(**{k: self.decode(v) for k, v in value["ns"].items()})
            if "obj" in value:
                return self.objects[value["obj"]]
        if isinstance(value, list):
            return [self.decode(v) for v in value]
        return value

    def encode(self, result, want, what):
        """The lines for the values the executable asked for, read from result by attribute or key."""
        lines = []
        for name, kind in want:
            v = result
            for part in ([] if name == "." else name.split(".")):
                if isinstance(v, dict) and part in v:
                    v = v[part]
                elif hasattr(v, part):
                    v = getattr(v, part)
                else:
                    raise Refusal("%s returned %r with no '%s'" % (what, type(result).__name__, name))
            if v is None:
                lines.append("none %s" % name)
            elif kind == "tensor":
                if not isinstance(v, self.torch.Tensor):
                    raise Refusal("%s returned %s = %r, not a tensor" % (what, name, type(v).__name__))
                if v.dtype not in self.codes:
                    raise Refusal("%s returned %s of dtype %s, not one mlacheck lends" % (what, name, v.dtype))
                block, offset = self.where(v, name)
                lines.append("tensor %s %d %d %d %d %s %s" % (name, block, offset, self.codes[v.dtype], v.dim(),
                                                            " ".join(str(s) for s in v.shape),
                                                            " ".join(str(s) for s in v.stride())))
            elif kind == "ints":
                vals = [int(x) for x in (v.tolist() if isinstance(v, self.torch.Tensor) else v)]
                lines.append("ints %s %d %s" % (name, len(vals), " ".join(str(x) for x in vals)))
            elif kind == "real":
                lines.append("real %s %r" % (name, float(v)))
            else:
                if isinstance(v, self.torch.Tensor):
                    v = v.item()
                if isinstance(v, bool):
                    v = int(v)
                if not isinstance(v, int):
                    raise Refusal("%s returned %s = %r, not an integer" % (what, name, v))
                lines.append("int %s %d" % (name, v))
        return lines

    # ---- the user's code ---------------------------------------------------------------------------
    def load(self, msg):
        self.backend = msg["backend"]
        # The progress file of the process loading it (a worker the command's probe started is lent to
        # the first child that runs cases, which has its own).
        if "progress" in msg:
            if msg["progress"]:
                os.environ["MLACHECK_PROGRESS_FILE"] = msg["progress"]
            else:
                os.environ.pop("MLACHECK_PROGRESS_FILE", None)
        if self.backend == "host":
            # CPU tensors: a @triton.jit kernel runs in Triton's interpreter (read when the user's
            # module is imported and its kernels decorated, so set before that). A user's own
            # TRITON_INTERPRET (say 0) is kept.
            os.environ.setdefault("TRITON_INTERPRET", "1")
        # A file that is not there is said before torch is imported (2 s of CPU for nothing).
        for spec in msg["specs"]:
            if spec["module"].endswith(".py") and not os.path.isfile(spec["module"]):
                return ["fail no such file '%s' (from %s)" % (spec["module"], os.getcwd())]
        try:
            import torch
        except Exception as e:  # noqa: BLE001 - any import failure is the same refusal
            return ["fail torch does not import in %s %s (%s); a Python callable is handed torch tensors: install "
                    "torch for this Python, or set MLACHECK_PYTHON to one that has it"
                    % (sys.executable, sys.version.split()[0], describe(e))]
        self.torch = torch
        self.dtypes = [getattr(torch, n, torch.uint8) for n in DTYPE_NAMES]
        self.codes = {}
        for code, dt in enumerate(self.dtypes):
            self.codes.setdefault(dt, code)
        if self.backend == "cuda":
            try:
                if not torch.cuda.is_available():
                    return ["fail torch %s sees no CUDA device (torch.cuda.is_available() is False)" % torch.__version__]
                self.cuda = Cuda(torch, msg.get("device", 0))
            except Exception as e:  # noqa: BLE001
                return ["fail cannot share CUDA memory with torch here: %s" % describe(e)]
        lines = ["ok"]
        for entry in self.blocks.values():  # a new process of the executable: its memory is new too
            if entry[3] is not None:
                self.cuda.close(entry[3])
        self.blocks, self.buffers, self.maps = {}, {}, {}
        for spec in msg["specs"]:
            op, module, name = spec["op"], spec["module"], spec["callable"]
            if module == "-":  # mlacheck.cases(): this process is the caller, with no function to import
                self.fns[op] = None
                lines.append("op %s %s" % (spec["spec"], op))
                lines.append("contract %s %s" % (op, json.dumps(os.environ.get("MLACHECK_PYTHON_CONTRACT", ""))))
                continue
            folder = "."
            if module.endswith(".py"):
                folder, module = os.path.split(module)
                module = module[:-3]
            sys.path.insert(0, os.path.abspath(folder or "."))
            try:
                m = importlib.import_module(module)
            except Exception as e:  # noqa: BLE001
                return ["fail module '%s' does not import: %s" % (spec["module"], describe(e))]
            fn = getattr(m, name, None)
            if fn is None:
                return ["fail module '%s' (%s) has no '%s'" % (module, getattr(m, "__file__", "?"), name)]
            if not callable(fn):
                return ["fail '%s' of module '%s' is not callable" % (name, module)]
            if not op:
                op = getattr(fn, "mlacheck_op", None) or (name if name in OPS else None)
                if not op:
                    return ["fail cannot tell which op '%s' implements: name it after the op, decorate it with "
                            "@mlacheck.implements(OP), or write OP=%s" % (name, spec["spec"])]
            if op not in OPS:
                return ["fail '%s' is not an op (%s)" % (op, ", ".join(OPS))]
            # A parameter no call passes is a mistake in the callable's signature, said here, once,
            # before any case runs (the executable sends what each stateless op's call, and each
            # stateful op's factory, passes).
            passes = msg.get("op_args", {}).get(op)
            if passes is not None:
                missing = missing_parameter(fn, passes)
                if missing is not None:
                    return ["fail %s (%s) takes '%s', which is not an argument mlacheck passes to %s (it passes: %s)"
                            % (name, spec["spec"], missing, op, ", ".join(passes))]
            self.fns[op] = fn
            contract = os.environ.get("MLACHECK_PYTHON_CONTRACT") or getattr(fn, "mlacheck_contract", None) or ""
            if not isinstance(contract, str):
                contract = "\n".join(contract)
            lines.append("op %s %s" % (spec["spec"], op))
            lines.append("contract %s %s" % (op, json.dumps(contract)))
            mirrors = getattr(fn, "mlacheck_mirrors", None)  # the docs/bugs.md row a seeded twin mirrors
            if mirrors:
                if not isinstance(mirrors, str) or not mirrors[:1].isupper() or not mirrors[1:].isdigit():
                    return ["fail '%s' has mlacheck_mirrors = %r, not a bug id of docs/bugs.md (a capital and digits: "
                            "'T1')" % (name, mirrors)]
                lines.append("mirrors %s@mirrors %s" % (op, mirrors))  # a name of its own: replies key on it
        # Triton kernels of these modules run in the interpreter: mlacheck measures their calls and
        # keeps a slow case from being called a hang (kernels/python_bridge.cpp).
        interpreted = self.backend == "host" and os.environ.get("TRITON_INTERPRET") == "1" and "triton" in sys.modules
        if interpreted:
            refusal = interpreter_refusal()
            if refusal:
                return ["fail " + refusal]
            install_bf16_model()
            install_fp8_model()
        if "triton" in sys.modules:
            COMPILING.install()
        lines.append("int interpreted %d" % int(interpreted))
        return lines

    def call(self, fn, what, args, positional=()):
        try:
            return call_with(fn, what, args, positional)
        finally:
            COMPILING.reset()  # a compile that raised never reached the post-compile hook

    def synchronize(self):
        if self.backend == "cuda":
            self.torch.cuda.synchronize()

    def handle(self, msg, fds):
        cmd = msg["cmd"]
        if cmd == "load":
            return self.load(msg)
        self.open_blocks(msg, fds)
        if cmd == "drop":
            return ["ok"]
        args = {k: self.decode(v) for k, v in msg.get("args", {}).items()}
        what = msg.get("what", cmd)
        if cmd == "call":  # a stateless op: the answer is written in place
            out = self.call(self.fns[msg["op"]], what, args)
            self.synchronize()
            if out is not None and not any(out is a for a in args.values()):
                raise Refusal("returned a %s instead of None: write the answer into the output tensors in place "
                              "(the return value is not read)" % type(out).__name__)
            return ["ok"]
        if cmd == "make":  # a stateful op's object
            obj = self.call(self.fns[msg["op"]], what, args)
            self.synchronize()
            if obj is None:
                raise Refusal("returned None instead of an object")
            for method in msg.get("methods", []):
                if not callable(getattr(obj, method, None)):
                    raise Refusal("returned a %s with no method '%s'" % (type(obj).__name__, method))
            oid = self.next_object
            self.next_object += 1
            self.objects[oid] = obj
            return ["ok", "int object %d" % oid]
        if cmd == "method":
            obj = self.objects[msg["object"]]
            result = getattr(obj, msg["method"])(*[self.decode(a) for a in msg.get("positional", [])])
            self.synchronize()
            if msg.get("keep"):  # a captured graph: kept here, named by an id
                oid = self.next_object
                self.next_object += 1
                self.objects[oid] = result
                return ["ok", "int object %d" % oid]
            return ["ok"] + self.encode(result, msg.get("want", []), what)
        if cmd == "release":  # a captured graph the executable is done with
            obj, graph = self.objects[msg["object"]], self.objects.pop(msg["graph"], None)
            release = getattr(obj, "release", None)
            if callable(release) and graph is not None:
                release(graph)
                self.synchronize()
            return ["ok"]
        if cmd == "forget":  # an object destroyed
            obj = self.objects.pop(msg["object"], None)
            close = getattr(obj, "close", None) if msg.get("close") else None
            if callable(close):
                close()
                self.synchronize()
            return ["ok"]
        raise Refusal("unknown command %r" % cmd)

    def cuda_fault(self, exc):
        """The fault's name when exc comes from a CUDA error that lost the context, else None."""
        if self.backend != "cuda" or self.torch is None:
            return None
        text = str(exc)
        try:
            self.torch.cuda.synchronize()
            sticky = False
        except Exception as again:  # noqa: BLE001
            sticky, text = True, str(again)
        if not sticky:
            return None
        for marker, name in (("illegal memory access", "cudaErrorIllegalAddress"),
                             ("misaligned address", "cudaErrorMisalignedAddress"),
                             ("unspecified launch failure", "cudaErrorLaunchFailure"),
                             ("illegal instruction", "cudaErrorIllegalInstruction"),
                             ("device-side assert", "cudaErrorAssert")):
            if marker in text:
                return name
        return "cudaErrorUnknown"

    def serve(self):
        while True:
            msg, fds = self.receive()
            if msg is None:
                return
            try:
                reply = self.handle(msg, fds)
            except Refusal as e:
                reply = ["fail " + one_line(e)]
            except Exception as e:  # noqa: BLE001 - the callable's exception is the verdict
                fault = self.cuda_fault(e)
                if fault is not None:
                    self.send(["crashed %s %s" % (fault, describe(e))], msg)
                    os._exit(0)
                reply = ["fail raised " + describe(e)]
            self.send(reply, msg)



def interpreter_refusal():
    """Why Triton's interpreter cannot run here, or None. Triton 3.6 and older turn a one-element
    array into an index with int(), which numpy 2.4 and later refuse: every kernel that loops over a
    runtime bound would fail each case with "TypeError: only 0-dimensional arrays can be converted
    to Python scalars". Said once, at load, instead."""
    try:
        import numpy
        import triton
    except ImportError:
        return None
    def version(v):
        return tuple(int(p) for p in (v.split("+")[0].split(".") + ["0", "0"])[:2] if p.isdigit())
    if version(triton.__version__) <= (3, 6) and version(numpy.__version__) >= (2, 4):
        return ("Triton %s's interpreter cannot run with numpy %s here (%s): it needs numpy < 2.4 (the project's "
                "environment has 2.3.5: scripts/pyenv.sh), or run on a GPU (--backend cuda)"
                % (triton.__version__, numpy.__version__, sys.executable))
    return None


# ---- bf16 in Triton's interpreter, as a GPU computes it -----------------------------------------------
#
# Installed by load() on the host backend once the user's modules imported Triton (their kernels run
# in the interpreter). It changes how the interpreter executes bf16 operations, never the user's
# code, and only where Triton 3.6's interpreter does not do what compiled Triton does on a GPU
# (tests/python/test_env.py shows each difference, with and without this model):
# - a bf16 value is kept as its uint16 bits and tl.dot multiplies those bits as integers (results
#   near 1e10; triton-lang/triton#11584): a bf16 operand of a dot is widened to fp32 first, which is
#   what a bf16 MMA does (exact products, fp32 accumulation);
# - fp32 -> bf16 (`x.to(tl.bfloat16)`, a store of fp32 through a bf16 pointer) rounds toward zero,
#   where compiled Triton rounds to nearest even: it rounds to nearest even here (torch's conversion,
#   NaN kept; an explicit rounding="rtz" stays toward zero); bf16 -> fp32 is the exact widening;
# - a binary op or comparison of two bf16 operands runs on the bits too: it is computed on their
#   fp32 values, an arithmetic result rounded to nearest even back to bf16 (one rounding per op).
# Reductions of bf16 tensors (tl.sum of bf16) stay wrong in the interpreter: such a kernel is
# checked on a GPU (docs/python.md says so).

def install_bf16_model():
    """Patches triton.runtime.interpreter.InterpreterBuilder once; False when this Triton's
    interpreter has not the methods it models (another version: left as it is)."""
    global BF16_MODEL
    if BF16_MODEL is not None:
        return BF16_MODEL
    BF16_MODEL = False
    try:
        import numpy as np
        import torch
        import triton.language as tl
        from triton.runtime import interpreter as interp
        Builder, Handle = interp.InterpreterBuilder, interp.TensorHandle
        cast_impl, fp_to_fp = Builder.cast_impl, Builder.create_fp_to_fp
        dot, binary_op = Builder.create_dot, Builder.binary_op
        rtz = interp._ir.ROUNDING_MODE.RTZ
    except (ImportError, AttributeError):
        return False
    bf16, f32 = tl.bfloat16, tl.float32

    def widen(h):
        """fp32 values of a bf16 handle (exact)."""
        return (np.asarray(h.data).astype(np.uint32) << 16).view(np.float32)

    def narrow(x):
        """bf16 bits (uint16) of fp32 values, rounded to nearest even."""
        a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
        return torch.from_numpy(a).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)

    def model_cast(self, src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        if s == bf16 and d == f32:
            return Handle(widen(src), f32)
        if s == f32 and d == bf16:
            return Handle(narrow(src.data), bf16)
        return cast_impl(self, src, dst_type)

    def model_fp_to_fp(self, src, dst_type, rounding_mode):
        s, d = src.dtype.scalar, dst_type.scalar
        if s == f32 and d == bf16 and rounding_mode != rtz:
            return Handle(narrow(src.data), bf16)
        if s == bf16 and d == f32:
            return Handle(widen(src), f32)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    def model_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == bf16:
            a = Handle(widen(a), f32)
        if b.dtype.scalar == bf16:
            b = Handle(widen(b), f32)
        return dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    def model_binary_op(self, lhs, rhs, op):
        if lhs.dtype.scalar == bf16 and rhs.dtype.scalar == bf16:
            out = op(widen(lhs), widen(rhs))
            if np.asarray(out).dtype == np.bool_:
                return Handle(out, tl.int1)
            return Handle(narrow(out), bf16)
        return binary_op(self, lhs, rhs, op)

    Builder.cast_impl, Builder.create_fp_to_fp = model_cast, model_fp_to_fp
    Builder.create_dot, Builder.binary_op = model_dot, model_binary_op
    BF16_MODEL = True
    return True


BF16_MODEL = None


# ---- fp8 in Triton's interpreter, as a GPU computes it --------------------------------------------
#
# Installed with the bf16 model. Triton 3.6's interpreter narrows to fp8 (float8e4nv, float8e5) with
# its own bit arithmetic, which drops the carry of a rounding into the exponent (31.4 becomes 16,
# not 32) and overflows past the largest finite value into other encodings (500 becomes 256). On an
# NVIDIA GPU the narrowing is cvt.rn.satfinite: rounded to nearest even, saturated to the largest
# finite value (448 for e4m3, 57344 for e5m2; an infinity too), NaN kept. Its widening reads the
# NaN encodings (and e5m2's infinities) as large finite numbers (e4m3 0x7f becomes 480). Here an fp8
# narrowing of fp32, fp16 or bf16 values with round-to-nearest (a cast, a store through an fp8
# pointer, `.to()`) is computed that way through torch, and every widening of fp8 (a cast, and the
# operands of tl.dot, which the interpreter widens to fp16) is torch's exact one; an explicit
# rounding="rtz" is left to the interpreter (tests/python/test_env.py checks all 256 encodings of
# each format and the narrowing of chosen values against torch, with and without the model).

def install_fp8_model():
    """Patches triton.runtime.interpreter.InterpreterBuilder once; False when this Triton's
    interpreter has not the methods it models (another version: left as it is)."""
    global FP8_MODEL
    if FP8_MODEL is not None:
        return FP8_MODEL
    FP8_MODEL = False
    try:
        import numpy as np
        import torch
        import triton.language as tl
        from triton.runtime import interpreter as interp
        Builder, Handle = interp.InterpreterBuilder, interp.TensorHandle
        cast_impl, fp_to_fp, dot = Builder.cast_impl, Builder.create_fp_to_fp, Builder.create_dot
        rtz = interp._ir.ROUNDING_MODE.RTZ
    except (ImportError, AttributeError):
        return False
    formats = {tl.float8e4nv: (torch.float8_e4m3fn, 448.0), tl.float8e5: (torch.float8_e5m2, 57344.0)}
    wide = {tl.float32: np.float32, tl.float16: np.float16}

    def widened(h, dst):
        """A handle of dst (fp32, fp16 or bf16) with the exact values of fp8 handle h, or None when h is
        no fp8 of these formats or dst no such type."""
        s = h.dtype.scalar
        if s not in formats or (dst not in wide and dst != tl.bfloat16):
            return None
        t = torch.from_numpy(np.ascontiguousarray(np.asarray(h.data), dtype=np.uint8)).view(formats[s][0])
        if dst == tl.bfloat16:
            return Handle(t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16), dst)
        return Handle(t.to(torch.float32).numpy().astype(wide[dst]), dst)

    def values(h):
        """fp32 values of a fp32, fp16 or bf16 handle, or None for another type."""
        s = h.dtype.scalar
        if s == tl.bfloat16:
            return (np.asarray(h.data).astype(np.uint32) << 16).view(np.float32)
        if s in wide:
            return np.asarray(h.data).astype(np.float32)
        return None

    def narrow(x, dst):
        """fp8 bits (uint8) of fp32 values: nearest even, saturated to the largest finite, NaN kept."""
        torch_dtype, largest = formats[dst]
        t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        t = torch.where(torch.isnan(t), t, t.clamp(-largest, largest))
        return t.to(torch_dtype).view(torch.uint8).numpy()

    def model_cast(self, src, dst_type):
        d = dst_type.scalar
        x = values(src) if d in formats else None
        if x is not None:
            return Handle(narrow(x, d), d)
        w = widened(src, d)
        return w if w is not None else cast_impl(self, src, dst_type)

    def model_fp_to_fp(self, src, dst_type, rounding_mode):
        d = dst_type.scalar
        x = values(src) if d in formats and rounding_mode != rtz else None
        if x is not None:
            return Handle(narrow(x, d), d)
        w = widened(src, d)
        return w if w is not None else fp_to_fp(self, src, dst_type, rounding_mode)

    def model_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        wa, wb = widened(a, tl.float16), widened(b, tl.float16)
        return dot(self, a if wa is None else wa, b if wb is None else wb, d, input_precision, max_num_imprecise_acc)

    Builder.cast_impl, Builder.create_fp_to_fp, Builder.create_dot = model_cast, model_fp_to_fp, model_dot
    FP8_MODEL = True
    return True


FP8_MODEL = None


# ---- Triton's compiler is progress, not a hang ----------------------------------------------------
#
# A Triton kernel compiles on its first launch with each specialization: seconds, tens of seconds
# for a large kernel, in the middle of a case. While it compiles, the worker keeps the suite's
# progress file fresh ($MLACHECK_PROGRESS_FILE, the file whose age the case timeout measures), so
# compiling never counts toward a hang and a kernel that spins on the GPU still does. Triton's own
# hooks say when (jit_cache_hook before a compile, jit_post_compile_hook after); hooks a user had set
# are called first, as before.

class Compiling:
    def __init__(self):
        self.depth = 0
        self.installed = False

    def install(self):
        path = os.environ.get("MLACHECK_PROGRESS_FILE")
        if self.installed or not path:
            return
        try:
            from triton import knobs
            runtime = knobs.runtime
            before, after = runtime.jit_cache_hook, runtime.jit_post_compile_hook
        except (ImportError, AttributeError):
            return
        import threading

        def on_cache(*a, **k):
            skip = before(*a, **k) if before else False
            if not skip:
                self.depth += 1
            return skip

        def on_compiled(*a, **k):
            self.depth = max(0, self.depth - 1)
            return after(*a, **k) if after else None

        def beat():
            while True:
                now = os.environ.get("MLACHECK_PROGRESS_FILE")  # the latest load's
                if self.depth > 0 and now:
                    try:
                        os.utime(now)
                    except OSError:
                        pass
                threading.Event().wait(0.25)

        runtime.jit_cache_hook, runtime.jit_post_compile_hook = on_cache, on_compiled
        threading.Thread(target=beat, daemon=True).start()
        self.installed = True

    def reset(self):
        self.depth = 0


COMPILING = Compiling()

def serve(fd):
    # A callable that crashes the interpreter (a segfault in an extension) leaves its Python stack on
    # stderr, which mlacheck passes on with its "the Python worker was killed by signal 11" line.
    faulthandler.enable()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
    try:
        Worker(sock).serve()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the process it served was stopped (a budget's end, a timeout): nothing to answer


# ---- the zygote ----------------------------------------------------------------------------------
# A command that runs cases in many isolated children needs a fresh worker in each (a child's worker
# holds that child's state). Started with `--zygote FD`, this process imports torch once (about 2 s
# of CPU) and then forks a worker, torch already imported, for each request on FD (a SOCK_SEQPACKET
# socket the command's processes share; kernels/python_worker.cpp). A request is one datagram: the
# requester's folder and environment, NUL-separated, with three descriptors attached: the worker's
# socket, and the requester's stdin and stderr. Each request gets a supervisor (a fork of this
# process) that forks the worker and waits for it:
# - it sends "worker-pid PID" on the worker's socket first (the requester kills a worker that hangs
#   by that pid), and "worker-ended exit N" or "worker-ended signal N" when the worker has ended (it
#   is not the requester's child, so the requester cannot wait for it);
# - it kills the worker when the requester's end of the socket closes (the requester died, say at a
#   budget's end), as PR_SET_PDEATHSIG does for a worker the requester started itself;
# - it dies with this process, and the worker with it; this process dies with the command.

def die_with_parent():
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def send_line(fd, text):
    data = (text + "\n").encode("utf-8")
    try:
        os.write(fd, struct.pack("<I", len(data)) + data)
    except OSError:
        pass  # the requester has gone


def supervise(parent, request, sock_fd, in_fd, err_fd):
    import select
    import signal
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    die_with_parent()
    if os.getppid() != parent:
        os._exit(1)
    me = os.getpid()
    worker = os.fork()
    if worker == 0:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        die_with_parent()
        if os.getppid() != me:
            os._exit(1)
        parts = request.split(b"\0")
        os.dup2(in_fd, 0)
        os.dup2(err_fd, 1)  # prints go to stderr, as for a worker started directly
        os.dup2(err_fd, 2)
        os.close(in_fd)
        os.close(err_fd)
        os.environb.clear()
        for item in parts[1:]:
            key, sep, value = item.partition(b"=")
            if sep and key:
                os.environb[key] = value
        try:
            os.chdir(parts[0])
        except OSError:
            pass
        sys.argv = ["-c", str(sock_fd)]
        serve(sock_fd)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    os.close(in_fd)
    os.close(err_fd)
    send_line(sock_fd, "worker-pid %d" % worker)
    poller = select.poll()
    poller.register(sock_fd, select.POLLRDHUP)
    ended = None
    while ended is None:
        events = poller.poll(200)
        pid, status = os.waitpid(worker, os.WNOHANG)
        if pid == worker:
            ended = status
        elif events:  # the requester's end closed: the worker is not needed any more
            os.kill(worker, signal.SIGKILL)
            ended = os.waitpid(worker, 0)[1]
    if os.WIFSIGNALED(ended):
        send_line(sock_fd, "worker-ended signal %d" % os.WTERMSIG(ended))
    else:
        send_line(sock_fd, "worker-ended exit %d" % os.WEXITSTATUS(ended))
    os._exit(0)


def zygote(fd, server=None):
    """Serves fork requests on fd (a connected SOCK_SEQPACKET socket) until every process of the
    command has closed its end; or, with server = (lock file, socket path, idle seconds), on every
    connection accepted on fd (a listening one: the zygote commands share, kernels/python_worker.cpp),
    until no connection has been open for the idle seconds."""
    import select
    import signal
    import time
    import warnings
    first = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd)
    try:
        import torch  # noqa: F401 - imported once here, so that no worker forked from here imports it
    except Exception:  # noqa: BLE001 - a worker says why when it loads (the same import)
        pass
    # numpy's BLAS keeps a thread, which has fork handlers of its own; Python 3.12 warns of any fork
    # in a process with threads. This one forks before any of that thread's work.
    warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the supervisors are reaped as they end
    # A Ctrl-C reaches the command's whole process group: the workers stop as they did when started
    # directly (KeyboardInterrupt), and this process and the supervisors, which end with the command
    # anyway, print no traceback of their own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    me = os.getpid()
    if server:  # its log (stderr): the pid, to end it by hand
        sys.stderr.write("mlacheck zygote %d serving %s (%s); ends after %g s without a command\n"
                         % (me, server[1], sys.executable, server[2]))
        sys.stderr.flush()
    conns = {} if server else {first.fileno(): first}
    listening = first if server else None
    idle_since = time.monotonic()
    while True:
        poller = select.poll()
        for c in conns:
            poller.register(c, select.POLLIN)
        if listening is not None:
            poller.register(listening.fileno(), select.POLLIN)
        try:
            ready = poller.poll(1000 if server else None)
        except InterruptedError:
            continue
        if server and not conns and not ready and time.monotonic() - idle_since >= server[2]:
            if retire(listening, server):
                return
            idle_since = time.monotonic()
            continue
        for c, _ in ready:
            if listening is not None and c == listening.fileno():
                try:
                    conn, _ = listening.accept()
                except OSError:
                    continue
                conns[conn.fileno()] = conn
                continue
            try:
                request, fds, _, _ = socket.recv_fds(conns[c], 1 << 20, 3)
            except InterruptedError:
                continue
            except OSError:
                request, fds = b"", []
            if not request and not fds:  # every process of that command has closed its end
                conns.pop(c).close()
                if not conns:
                    if not server:
                        return
                    idle_since = time.monotonic()
                continue
            if len(fds) != 3:
                for d in fds:
                    os.close(d)
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                try:
                    for other in list(conns.values()) + ([listening] if listening is not None else []):
                        other.close()
                    supervise(me, request, *fds)
                finally:
                    os._exit(0)
            for d in fds:
                os.close(d)


def retire(listening, server):
    """An idle shared zygote ends, under the lock its starters take: a connection that came in
    meanwhile keeps it (False); else its socket file goes with it (True)."""
    import fcntl
    lock_path, socket_path, _ = server
    try:
        lock = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return True
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        import select
        if select.select([listening], [], [], 0)[0]:
            return False
        try:
            os.unlink(socket_path)  # no starter re-binds it while this one answers (they hold the lock)
        except OSError:
            pass
        listening.close()
        return True
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--zygote":
        zygote(int(sys.argv[2]))
    elif len(sys.argv) == 6 and sys.argv[1] == "--zygote-server":
        zygote(int(sys.argv[2]), (sys.argv[3], sys.argv[4], float(sys.argv[5])))
    else:
        serve(int(sys.argv[1]))


if __name__ == "__main__":
    main()
