"""The Python environment scripts/pyenv.sh makes (python/requirements.lock): torch 2 and Triton 3
from PyPI, and a numpy that Triton's interpreter accepts. Fails when the combination breaks: a
kernel with a loop over a runtime bound (the shape every Triton kernel of this path has) runs
under TRITON_INTERPRET=1 on CPU tensors and gives the right sum."""
import os
import subprocess
import sys

KERNEL = r'''
import torch, triton, triton.language as tl

@triton.jit
def row_sums(x, out, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, n):  # a runtime bound: the interpreter's int() of a one-element array
        acc += tl.load(x + i * BLOCK + tl.arange(0, BLOCK))
    tl.store(out + tl.arange(0, BLOCK), acc)

x = torch.arange(5 * 16, dtype=torch.float32).reshape(5, 16)
out = torch.empty(16)
row_sums[(1,)](x, out, 5, BLOCK=16)
assert torch.equal(out, x.sum(0)), (out, x.sum(0))
print("interpreted", torch.__version__, triton.__version__)
'''


def test_torch_2_and_triton_3_from_pypi():
    import torch
    import triton
    assert int(torch.__version__.split(".")[0]) >= 2, torch.__version__
    assert int(triton.__version__.split(".")[0]) >= 3, triton.__version__


def test_a_triton_kernel_with_a_runtime_loop_runs_in_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    p = subprocess.run([sys.executable, "-c", KERNEL], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=300)
    assert p.returncode == 0 and "interpreted" in p.stdout, p.stdout[-2000:]


def test_pytest_xdist_is_there():
    import xdist  # noqa: F401 - pytest -n, which tests/python/test_package.py runs


BF16 = r'''
import sys, torch, triton, triton.language as tl
sys.path.insert(0, sys.argv[1])
from mlacheck import _worker

@triton.jit
def to_bf16(x, y, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(y + o, tl.load(x + o).to(tl.bfloat16))

@triton.jit
def dot16(a, b, c, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(a + i[:, None] * N + i[None, :])
    w = tl.load(b + i[:, None] * N + i[None, :])
    tl.store(c + i[:, None] * N + i[None, :], tl.dot(x, w))

x = torch.tensor([1.0 + 2**-8 + 2**-10, 1.0 + 3 * 2**-8, -1.0 - 2**-8 - 2**-12, 3.0], dtype=torch.float32)
a = torch.randn(16, 16).to(torch.bfloat16)
b = torch.randn(16, 16).to(torch.bfloat16)
want_dot = a.float() @ b.float()
if sys.argv[2] == "model":
    assert _worker.install_bf16_model()
y = torch.empty(4, dtype=torch.bfloat16)
to_bf16[(1,)](x, y, N=4)
c = torch.empty(16, 16)
dot16[(1,)](a, b, c, N=16)
print("rounds", "nearest" if torch.equal(y, x.to(torch.bfloat16)) else "not-nearest")
print("dot", "right" if torch.allclose(c, want_dot, rtol=1e-5, atol=1e-5) else "wrong")
'''


def run_interpreted(program, mode):
    """program's output, run in the interpreter by a fresh Python; mode "model" installs the worker's
    model first, "plain" leaves the interpreter as it is."""
    python_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
    env = dict(os.environ, TRITON_INTERPRET="1")
    p = subprocess.run([sys.executable, "-c", program, python_dir, mode], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:]
    return p.stdout


def run_bf16(mode):
    return run_interpreted(BF16, mode)


def test_the_interpreter_alone_gets_bf16_wrong():
    # Triton 3.6's interpreter: fp32 -> bf16 toward zero, tl.dot of bf16 on the bits. When a Triton
    # release fixes them this fails: the worker's model (below) is then to be dropped for it.
    out = run_bf16("plain")
    assert "rounds not-nearest" in out and "dot wrong" in out, out


def test_the_worker_s_bf16_model_computes_as_a_gpu():
    out = run_bf16("model")
    assert "rounds nearest" in out and "dot right" in out, out


FP8 = r'''
import sys, torch, triton, triton.language as tl
sys.path.insert(0, sys.argv[1])
from mlacheck import _worker

@triton.jit
def narrow(x, y, z, N: tl.constexpr, E4: tl.constexpr):
    o = tl.arange(0, N)
    v = tl.load(x + o)
    if E4:
        tl.store(y + o, v.to(tl.float8e4nv))
    else:
        tl.store(y + o, v.to(tl.float8e5))
    tl.store(z + o, v)  # fp32 stored through an fp8 pointer: the implicit cast

@triton.jit
def widen(x, y, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(y + o, tl.load(x + o).to(tl.float32))

if sys.argv[2] == "model":
    assert _worker.install_fp8_model()
x = torch.tensor([31.4, 1.0, -2.5, 448.0, 0.1, 500.0, -1e6, float("inf"), -float("inf"), float("nan"), 1e-3, 2.0**-9,
                  3.0 * 2**-10, -0.0, 15.5, 57000.0], dtype=torch.float32)
for name, dt, largest, e4 in (("e4m3", torch.float8_e4m3fn, 448.0, True), ("e5m2", torch.float8_e5m2, 57344.0, False)):
    want = torch.where(torch.isnan(x), x, x.clamp(-largest, largest)).to(dt).view(torch.uint8)
    y = torch.zeros(16, dtype=dt)
    z = torch.zeros(16, dtype=dt)
    narrow[(1,)](x, y, z, N=16, E4=e4)
    same = torch.equal(y.view(torch.uint8), want) and torch.equal(z.view(torch.uint8), want)
    print(name, "narrows", "as-gpu" if same else "not-as-gpu")
    bits = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dt)
    w = torch.zeros(256)
    widen[(1,)](bits, w, N=256)
    ref = bits.float()
    print(name, "widens", "exact" if torch.equal(torch.isnan(w), torch.isnan(ref)) and
          torch.equal(w[~torch.isnan(w)], ref[~torch.isnan(ref)]) else "wrong")
'''


def run_fp8(mode):
    return run_interpreted(FP8, mode)


def test_the_interpreter_alone_narrows_fp8_wrong():
    # Triton 3.6's interpreter: 31.4 -> 16 (a rounding's carry dropped), 500 -> 256 (no saturation).
    # When a Triton release fixes it this fails: the worker's fp8 model is then to be dropped for it.
    out = run_fp8("plain")
    assert "e4m3 narrows not-as-gpu" in out, out


def test_the_worker_s_fp8_model_narrows_as_a_gpu_and_widening_is_exact():
    out = run_fp8("model")
    for line in ("e4m3 narrows as-gpu", "e5m2 narrows as-gpu", "e4m3 widens exact", "e5m2 widens exact"):
        assert line in out, out


def test_a_numpy_the_interpreter_refuses_is_one_line_at_load(monkeypatch):
    # The GPU machine's own Python has numpy 2.5.2 with Triton 3.6: the worker says so once, at
    # load, instead of an InterpreterError on every case.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from mlacheck import _worker
    import numpy
    import triton
    assert _worker.interpreter_refusal() is None  # this environment's numpy works
    monkeypatch.setattr(numpy, "__version__", "2.5.2")
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    why = _worker.interpreter_refusal()
    assert why and "cannot run with numpy 2.5.2" in why and "scripts/pyenv.sh" in why, why
