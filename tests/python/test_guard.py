"""mlacheck.guard() and `pytest -p mlacheck --mlacheck-guard` (python/mlacheck/guard.py): a torch CPU
custom op and a Triton kernel (in the interpreter) that write one row past their output view are
caught with the argument, row and column, their correct twins are clean, a write to an input the
schema only reads is told, the saved call replays alone, and a user's unchanged test file fails only
the tests that reach the bug. Run by ctest (python.guard) with MLACHECK_GUARD_LIB and
TRITON_INTERPRET=1 set."""
import os
import subprocess
import sys

import pytest
import torch

import mlacheck

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "guard"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))
import guard_ops  # noqa: E402,F401


def test_a_custom_op_that_keeps_to_its_view_is_clean():
    buf = torch.zeros(8, 4)
    with mlacheck.guard() as g:
        torch.ops.mlacheck_test.copy_rows(torch.ones(3, 4), buf[:3])
    assert g.calls == 1 and not g.findings
    assert torch.equal(buf[:3], torch.ones(3, 4))


def test_every_way_python_calls_an_op_is_watched_and_aten_ops_never_reach_the_guard():
    held = torch.ops.mlacheck_test.copy_rows_buggy.default  # an overload taken before the block
    for call in (lambda out: held(torch.ones(1, 4), out),
                 lambda out: guard_ops.copy_rows_buggy(torch.ones(1, 4), out),  # a torch.library.custom_op function
                 lambda out: torch.ops.mlacheck_test.copy_rows_buggy(torch.ones(1, 4), out)):
        buf = torch.zeros(4, 4)
        with pytest.raises(mlacheck.StrayWrite, match="copy_rows_buggy .torch.ops.: stray write"):
            with mlacheck.guard(save=None):
                call(buf[:1])
    # The packet's call is judged as the overload torch picks for its arguments.
    buf = torch.zeros(4)
    with mlacheck.guard(save=None) as g:
        torch.ops.mlacheck_test2.fill(buf[:2])
    assert g.calls == 1 and buf.tolist() == [1, 1, 0, 0]
    with pytest.raises(mlacheck.StrayWrite,
                       match=r"mlacheck_test2\.fill\.value .torch.ops.: stray write: 1 byte .*index \[2\] .past the view"):
        with mlacheck.guard(save=None):
            torch.ops.mlacheck_test2.fill(buf[:2], 2.0)
    # A call on fake tensors (torch.compile tracing) passes unwatched, and is counted; a plain
    # subclass (nn.Parameter) is watched as a tensor is.
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as fake:
        x, out = torch.empty(2, 4), torch.empty(4, 4)
    with mlacheck.guard(save=None) as g:
        with fake:
            torch.ops.mlacheck_test.copy_rows(x, out[:2])
        torch.ops.mlacheck_test.copy_rows(torch.nn.Parameter(torch.ones(2, 4)), torch.zeros(4, 4)[:2])
    assert g.traced == 1 and g.calls == 1, (g.traced, g.calls)
    # Without poison no dispatch mode is pushed: the test's own aten ops run as they do unguarded.
    with mlacheck.guard(save=None):
        assert torch._C._len_torch_dispatch_stack() == 0
    with mlacheck.guard(save=None, poison=True):
        assert torch._C._len_torch_dispatch_stack() == 1


def test_a_custom_op_that_writes_the_row_after_its_view_is_caught_with_row_and_column(tmp_path):
    buf = torch.zeros(8, 4)
    with pytest.raises(mlacheck.StrayWrite) as e:
        with mlacheck.guard(save=str(tmp_path)):
            torch.ops.mlacheck_test.copy_rows_buggy(torch.ones(3, 4), buf[:3])
    text = str(e.value)
    assert "mlacheck guard: mlacheck_test.copy_rows_buggy (torch.ops): stray write: 8 bytes outside" in text, text
    assert "first at storage byte 50 (0x0 -> 0xe0)" in text, text  # 7.0f is 00 00 e0 40
    assert "nearest argument 'out' (torch.float32[3, 4], strides (4, 1), storage offset 0): row 3, column 0 " \
           "(past the view's 3 rows)" in text, text
    assert e.value.call_file and os.path.exists(e.value.call_file), text
    # Rerun alone, in a fresh process: the same finding, exit 1.
    p = subprocess.run([sys.executable, "-m", "mlacheck.rerun", e.value.call_file, "--import",
                        os.path.join(HERE, "guard", "guard_ops.py")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    assert p.returncode == 1, p.stdout
    assert "row 3, column 0 (past the view's 3 rows)" in p.stdout, p.stdout


def test_a_large_buffer_is_watched_without_a_whole_copy_and_its_call_is_not_saved(tmp_path):
    # 16 MiB and 128 bytes: past the watch's exact limit, so only the 256 KiB around the view are kept
    # exactly, the rest by checksum; the row after the view is still reported byte for byte.
    buf = torch.zeros((1 << 20) + 8, 4)
    with pytest.raises(mlacheck.StrayWrite) as e:
        with mlacheck.guard(save=str(tmp_path)):
            torch.ops.mlacheck_test.copy_rows_buggy(torch.ones(3, 4), buf[:3])
    text = str(e.value)
    assert "first at storage byte 50 (0x0 -> 0xe0)" in text and "row 3, column 0" in text, text
    assert "the call was not saved: a storage of 16777344 bytes, past the 16 MiB the watch keeps whole" in text, text
    assert not os.listdir(str(tmp_path))


def test_mlacheck_repro_reruns_a_saved_call_and_emits_a_pytest_file(tmp_path):
    buf = torch.zeros(8, 4)
    with pytest.raises(mlacheck.StrayWrite) as e:
        with mlacheck.guard(save=str(tmp_path)):
            torch.ops.mlacheck_test.copy_rows_buggy(torch.ones(3, 4), buf[:3])
    assert "rerun it alone: mlacheck repro %s --python MODULE" % e.value.call_file in str(e.value)
    env = dict(os.environ, MLACHECK_PYTHON=sys.executable)
    ops = os.path.join(HERE, "guard", "guard_ops.py")

    def repro(*args):
        return subprocess.run([mlacheck.binary(), "repro", e.value.call_file] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, env=env)
    p = repro("--python", ops)
    assert p.returncode == 1 and "row 3, column 0 (past the view's 3 rows)" in p.stdout, p.stdout
    p = repro()  # nothing registers the op: one line, exit 2
    assert p.returncode == 2 and "give --import, or mlacheck repro's --python, the module" in p.stdout, p.stdout
    out = str(tmp_path / "test_repro.py")
    p = repro("--python", ops, "--emit", "pytest:" + out)
    assert p.returncode == 0 and os.path.exists(out), p.stdout
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", out], cwd=str(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert run.returncode == 1 and "row 3, column 0" in run.stdout, run.stdout
    p = repro("--emit", "junit:x")
    assert p.returncode == 2 and "is not pytest:FILE" in p.stdout, p.stdout


def test_poison_makes_an_element_a_kernel_never_wrote_visible():
    with mlacheck.guard(poison=True):
        out = torch.empty(2, 3)
        torch.ops.mlacheck_test.fill_some(out)
        idx = torch.empty(4, dtype=torch.int32)
    assert torch.isnan(out.view(-1)[-1]) and not torch.isnan(out.view(-1)[:-1]).any()
    assert int(idx[0]) == int.from_bytes(b"\xa5" * 4, "little", signed=True)


def test_repeat_catches_an_order_dependent_sum_and_passes_a_top_k_whose_ties_move():
    torch.manual_seed(0)
    x = torch.randn(4, 512) * 1e4
    with pytest.raises(mlacheck.NotDeterministic, match="not deterministic: argument 'out' .* differs between "
                                                         "run 1 and run 2 on the same inputs, first at index"):
        with mlacheck.guard(repeat=3, save=None):
            torch.ops.mlacheck_test.sum_rows_racy(x, torch.empty(4))
    # A top-k of tied scores picks other indices each call: the same scores, so no finding.
    ties = torch.zeros(3, 64)
    ties[:, ::3] = 1.0
    with mlacheck.guard(repeat=3, save=None) as g:
        torch.ops.mlacheck_test.topk_rows(ties, 8, torch.empty(3, 8, dtype=torch.int64))
    assert g.calls == 1 and not g.findings
    # ... but one that picks a lower score on a later call is caught.
    with pytest.raises(mlacheck.NotDeterministic, match="rows compared as the sets of scores they pick"):
        with mlacheck.guard(repeat=2, save=None):
            torch.ops.mlacheck_test.topk_rows_flaky(ties, 8, torch.empty(3, 8, dtype=torch.int64))
    with pytest.raises(ValueError, match="repeat=0"):
        with mlacheck.guard(repeat=0):
            pass


def test_repeat_reruns_a_triton_launch_and_compares_what_it_wrote():
    pytest.importorskip("triton", reason="skipped: no Triton")
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("skipped: TRITON_INTERPRET=1 is not set (no GPU: the interpreter runs the kernel)")
    import copy_rows_triton
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.arange(16, dtype=torch.float32, device=device).reshape(4, 4)
    buf = torch.zeros(8, 4, device=device)
    with mlacheck.guard(repeat=3, save=None) as g:
        copy_rows_triton.copy_rows(x, buf[:3])
    assert g.calls == 1 and g.repeats == 2 and not g.findings, g.findings
    # A launch whose result depends on more than its tensors (here a grid that changes from one
    # evaluation to the next) differs between runs: the first run writes rows 0 and 1, the second
    # row 0 alone.
    evaluations = [0]

    def grid(meta):
        evaluations[0] += 1
        return (2 if evaluations[0] % 2 == 0 else 1,)
    buf = torch.zeros(8, 4, device=device)
    with pytest.raises(mlacheck.NotDeterministic, match=r"copy_rows_triton._copy_rows \(Triton launch\): not "
                                                        r"deterministic: argument 'out_ptr' .* differs between run 1 "
                                                        r"and run 2 on the same inputs, first at index \[1, 0\]"):
        with mlacheck.guard(repeat=2, save=None):
            copy_rows_triton._copy_rows[grid](x, buf[:2], 4, x.stride(0), 4, BLOCK=4)


def test_a_write_to_an_input_the_schema_only_reads_is_told():
    x = torch.ones(2, 4)
    with pytest.raises(mlacheck.StrayWrite, match="write to an input: 2 bytes changed .* in argument 'x' "
                                                  r"\(torch.float32\[2, 4\], strides \(4, 1\), storage offset 0\): "
                                                  "row 0, column 0"):
        with mlacheck.guard(save=None):
            torch.ops.mlacheck_test.scale_rows(x, torch.empty(2, 4))


def test_an_argument_declared_scratch_may_be_written_and_only_by_the_ops_named():
    # scale_rows writes x, which its schema says it only reads: a workspace the schema forgot, say.
    for scratch in ("x", "mlacheck_test.scale_*:x", ["other", "mlacheck_test.*:x"]):
        with mlacheck.guard(save=None, scratch=scratch) as g:
            torch.ops.mlacheck_test.scale_rows(torch.ones(2, 4), torch.empty(2, 4))
        assert g.calls == 1 and not g.findings, scratch
    for scratch in ("y", "mlacheck_test.copy_*:x"):  # another argument, another op: still told
        with pytest.raises(mlacheck.StrayWrite, match="write to an input"):
            with mlacheck.guard(save=None, scratch=scratch):
                torch.ops.mlacheck_test.scale_rows(torch.ones(2, 4), torch.empty(2, 4))
    with pytest.raises(ValueError, match="give argument names, NAME or OP:NAME"):
        with mlacheck.guard(scratch="op:"):
            pass


def test_namespaces_not_selected_are_not_watched():
    buf = torch.zeros(8, 4)
    with mlacheck.guard(namespaces=["vllm*"]) as g:
        torch.ops.mlacheck_test.copy_rows_buggy(torch.ones(3, 4), buf[:3])
    assert g.calls == 0


def test_a_triton_kernel_in_the_interpreter_is_caught_and_its_correct_twin_is_clean(tmp_path):
    pytest.importorskip("triton", reason="skipped: no Triton")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("skipped: TRITON_INTERPRET=1 is not set (no GPU: the interpreter runs the kernel)")
    import copy_rows_triton
    x = torch.arange(16, dtype=torch.float32).reshape(4, 4)  # a row to spare for the buggy launch
    buf = torch.zeros(8, 4)
    with mlacheck.guard() as g:
        copy_rows_triton.copy_rows(x, buf[:3])
    assert g.calls == 1 and torch.equal(buf[:3], x[:3])
    buf = torch.zeros(8, 4)
    with pytest.raises(mlacheck.StrayWrite) as e:
        with mlacheck.guard(save=str(tmp_path)):
            copy_rows_triton.copy_rows_buggy(x, buf[:3])
    text = str(e.value)
    assert "copy_rows_triton._copy_rows (Triton launch): stray write: " in text, text
    assert "nearest argument 'out_ptr' (torch.float32[3, 4], strides (4, 1), storage offset 0): row 3, column 0" in text
    p = subprocess.run([sys.executable, "-m", "mlacheck.rerun", e.value.call_file], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    assert p.returncode == 1 and "row 3, column 0" in p.stdout, p.stdout


def test_a_tensor_on_another_device_is_one_line():
    t = torch.empty(2, 4, device="meta")
    with pytest.raises(RuntimeError, match="is on meta; the guard watches host .CPU. tensors"):
        with mlacheck.guard():
            torch.ops.mlacheck_test.copy_rows(t, t)


def test_no_library_is_one_line(monkeypatch):
    gm = sys.modules["mlacheck.guard"]  # the module (mlacheck.guard is the function)
    monkeypatch.setattr(gm, "_lib", None)
    monkeypatch.setenv("MLACHECK_GUARD_LIB", "/nonexistent/libmlacheck_guard.so")
    with pytest.raises(RuntimeError, match="mlacheck guard: no libmlacheck_guard.so"):
        with mlacheck.guard():
            torch.ops.mlacheck_test.copy_rows(torch.ones(1, 4), torch.zeros(1, 4))


def run_user_suite(tmp_path, *flags):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "..", "python"),
                                                       os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "mlacheck", "-p", "no:cacheprovider", "-q", "-rf",
                           os.path.join(HERE, "guard", "test_user_suite.py")] + list(flags), cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)


def test_a_users_unchanged_test_file_fails_exactly_the_tests_that_reach_the_bug(tmp_path):
    plain = run_user_suite(tmp_path)
    assert "5 passed" in plain.stdout, plain.stdout  # the suite's own assertions read only the views
    guarded = run_user_suite(tmp_path, "--mlacheck-guard")
    assert "2 failed, 3 passed" in guarded.stdout, guarded.stdout
    assert "FAILED" in guarded.stdout and "test_copy_rows_buggy[1]" in guarded.stdout, guarded.stdout
    assert "test_copy_rows_buggy[3]" in guarded.stdout and "opted_out" not in guarded.stdout.split("short test summary")[-1]
    assert "row 1, column 0 (past the view's 1 rows)" in guarded.stdout or "row 1, column 0" in guarded.stdout, guarded.stdout
    saved = os.listdir(os.path.join(str(tmp_path), "mlacheck-guard"))
    assert len(saved) == 2, saved
    assert "mlacheck guard: 4 call(s) guarded in 4 test(s)" in guarded.stdout, guarded.stdout
    # The failure is shown at the test's own line, not in torch's dispatcher or the guard.
    assert "copy_rows_buggy(x, buf[:rows])\nE       mlacheck.guard.StrayWrite: mlacheck guard: " in guarded.stdout, \
        guarded.stdout
    assert "torch/_ops.py" not in guarded.stdout and "mlacheck/guard.py" not in guarded.stdout, guarded.stdout
    # Namespaces that match no op: nothing was checked, and the run says so and fails.
    none = run_user_suite(tmp_path, "--mlacheck-guard", "--mlacheck-guard-ns", "vlm*", "-k", "not buggy")
    assert none.returncode == 1 and "2 passed" in none.stdout, none.stdout
    assert "mlacheck guard: NO RUN: no guarded test called a custom op of those namespaces" in none.stdout, none.stdout
    # Under pytest-xdist the workers' totals reach the controller's closing line.
    pytest.importorskip("xdist", reason="skipped: no pytest-xdist")
    spread = run_user_suite(tmp_path, "--mlacheck-guard", "-n", "2")
    assert "2 failed, 3 passed" in spread.stdout, spread.stdout
    assert "mlacheck guard: 4 call(s) guarded in 4 test(s)" in spread.stdout and "2 finding(s)" in spread.stdout, \
        spread.stdout


def test_a_far_write_into_a_large_buffer_is_found_by_its_block():
    buf = torch.zeros((1 << 20) + 8, 4)  # past the exact limit
    with pytest.raises(mlacheck.StrayWrite) as e:
        with mlacheck.guard(save=None):
            torch.ops.mlacheck_test.copy_rows_far(torch.ones(3, 4), buf[:3])
    text = str(e.value)
    assert "stray write: 1 block of 4096 bytes more than 262144 bytes from every view; first at storage byte " \
           "16777216 (the block of bytes [16777216, 16777344): its old bytes are not kept" in text, text


# ---- on a GPU: the watch's kernels (libmlacheck_guard.so built with nvcc) --------------------------
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="skipped: no GPU")


@cuda
# A small buffer (kept whole), one past the exact limit, and a view in its middle (the exact window then
# starts at a byte that is no multiple of 64: its writable bits are shifted into place).
@pytest.mark.parametrize("mib,start", [(0, 0), (17, 0), (17, 600001)])
def test_on_cuda_a_custom_op_past_its_view_is_caught_and_its_twin_is_clean(tmp_path, mib, start):
    rows = max(8, (mib << 20) // 16)
    buf = torch.zeros(rows, 4, device="cuda")
    with mlacheck.guard(save=str(tmp_path)) as g:
        torch.ops.mlacheck_test.copy_rows(torch.ones(3, 4, device="cuda"), buf[start:start + 3])
    assert g.calls == 1 and not g.findings
    with pytest.raises(mlacheck.StrayWrite) as e:
        with mlacheck.guard(save=str(tmp_path)):
            torch.ops.mlacheck_test.copy_rows_buggy(torch.ones(3, 4, device="cuda"), buf[start:start + 3])
    text = str(e.value)
    assert "first at storage byte %d (0x0 -> 0xe0)" % ((start + 3) * 16 + 2) in text, text
    assert "row 3, column 0 (past the view's 3 rows)" in text, text
    if mib == 0:
        p = subprocess.run([sys.executable, "-m", "mlacheck.rerun", e.value.call_file, "--import",
                            os.path.join(HERE, "guard", "guard_ops.py")], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        assert p.returncode == 1 and "row 3, column 0" in p.stdout, p.stdout
    buf = torch.zeros(rows, 4, device="cuda")
    with pytest.raises(mlacheck.StrayWrite, match="stray write: "):
        with mlacheck.guard(save=None):
            torch.ops.mlacheck_test.copy_rows_far(torch.ones(3, 4, device="cuda"), buf[start:start + 3])


@cuda
def test_on_cuda_a_triton_kernel_past_its_view_is_caught_and_its_twin_is_clean(tmp_path):
    pytest.importorskip("triton", reason="skipped: no Triton")
    import copy_rows_triton
    x = torch.arange(16, dtype=torch.float32, device="cuda").reshape(4, 4)
    buf = torch.zeros(8, 4, device="cuda")
    with mlacheck.guard() as g:
        copy_rows_triton.copy_rows(x, buf[:3])
    assert g.calls == 1 and torch.equal(buf[:3], x[:3])
    with pytest.raises(mlacheck.StrayWrite) as e:
        with mlacheck.guard(save=str(tmp_path)):
            copy_rows_triton.copy_rows_buggy(x, buf[:3])
    assert "nearest argument 'out_ptr' (torch.float32[3, 4], strides (4, 1), storage offset 0): row 3, column 0" \
        in str(e.value), str(e.value)


@pytest.mark.parametrize("module,fn,op", [("topk_triton", "topk_decode", "topk_decode"),
                                          ("topk_torch", "topk_decode", "topk_decode"),
                                          ("mla_decode_triton", "mla_decode", "mla_decode")])
def test_the_projects_own_examples_under_mlachecks_cases_give_the_guard_no_finding(tmp_path, module, fn, op):
    # No false positive on the project's own examples: each case mlacheck's suite serves (views of
    # its guarded buffers: on the host each buffer of the shared arena a storage of its own, on cuda
    # one cudaMalloc each) is run under the guard, which must find nothing where the suite passes.
    # The far-rows and far-pages properties are left out: their buffers span tens of GiB, reserved
    # and sparse, which mlacheck does not lend to Python on cuda and the guard refuses on the host
    # in one line (it reads a storage whole).
    backend = "cuda" if torch.cuda.is_available() else "host"
    if "triton" in module:
        pytest.importorskip("triton", reason="skipped: no Triton")
        if backend == "host" and os.environ.get("TRITON_INTERPRET") != "1":
            pytest.skip("skipped: TRITON_INTERPRET=1 is not set (no GPU: the interpreter runs the kernel)")
    import importlib
    impl = getattr(importlib.import_module(module), fn)
    props = [p for p in mlacheck.properties(op) if ".far_" not in p]
    if backend == "host" and op == "mla_decode":  # the interpreter reaches only its smaller cases in time
        props = ["mla_decode.equals_oracle"]
    run = mlacheck.cases(op, budget=30 if backend == "cuda" else 3 if module == "topk_torch" else 5, backend=backend,
                         seed=1, save=str(tmp_path),
                         property=props, contract=getattr(impl, "mlacheck_contract", None))
    with mlacheck.guard(save=str(tmp_path)) as g:
        for case in run:
            case.run(impl)
    # No finding and no failure is the claim. On a loaded machine a property may be left without a case
    # (PARTIAL, each such property saying so: the interpreter's predicted time past half the case
    # timeout), which is no pass of that property and no failure either.
    v = run.verdict
    assert not g.findings and not v.failures and v.cases_run > 0, (str(v), g.findings)
    assert v or (v.result == "PARTIAL" and "no case ran" in v.unjudged), str(v)
    assert g.calls > 0 or module == "topk_torch", (str(v), g.calls)


def test_a_host_storage_larger_than_half_the_memory_is_refused_in_one_line(monkeypatch):
    gm = sys.modules["mlacheck.guard"]
    monkeypatch.setattr(gm, "_half_the_memory", lambda: 512)
    buf = torch.zeros(64, 4)  # 1 KiB: more than half of a machine of 1 KiB
    with pytest.raises(RuntimeError, match=r"argument 'out' .* is a view of a host storage of 0.0 GiB, more than half "
                                           r"this machine's memory"):
        with mlacheck.guard(save=None):
            torch.ops.mlacheck_test.copy_rows(torch.ones(1, 4), buf[:1])
    monkeypatch.setattr(gm, "_half_the_memory", lambda: 1 << 40)
    with mlacheck.guard(save=None) as g:
        torch.ops.mlacheck_test.copy_rows(torch.ones(1, 4), buf[:1])
    assert g.calls == 1


# ---- the red-zone allocator (core/backend/cuda_guard_allocator.cu) --------------------------------
def test_as_if_gives_the_stray_elements_coordinates_past_and_before_the_view():
    _as_if = sys.modules["mlacheck.guard"]._as_if
    t = torch.zeros(3, 4, dtype=torch.int32)
    assert _as_if(t, 48) == "[3, 0]"   # the first byte past the tensor: row 3, column 0
    assert _as_if(t, 52) == "[3, 1]"
    assert _as_if(t, -4) == "[-1, 3]"  # the element before it: the row before, last column
    v = torch.zeros(8, 6)[2:5, 1:4]   # a view with a storage offset and a row stride of 6
    assert _as_if(v, 4 * (5 * 6 + 1)) == "[3, 0]"
    assert _as_if(v, 4 * (2 * 6 + 0)) == "[-1, 5]"  # the element before the view: row -1, column 5


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the allocator is tested on it below")
def test_the_red_zone_allocator_without_a_gpu_is_one_line(tmp_path):
    with pytest.raises(RuntimeError, match="the red-zone allocator .* guards CUDA tensors, and torch .* sees no CUDA "
                                           "device here"):
        with mlacheck.guard(alloc=True):
            pass
    p = run_user_suite(tmp_path, "--mlacheck-guard-alloc")
    assert p.returncode == 4 and "sees no CUDA device here" in p.stdout, p.stdout


def test_a_block_a_graph_wrote_after_its_free_fails_the_guarded_block_at_its_end(monkeypatch):
    # The allocator's quarantine is scanned when the block ends (on a GPU: test_on_cuda_... below);
    # here its answer is stood in for, to see the block end raise it and count it.
    mg = sys.modules["mlacheck.guard"]  # the module (mlacheck.guard is the function)
    monkeypatch.setattr(mg, "_quarantine_finding", lambda: "mlacheck guard: 1 block(s) freed while a captured CUDA "
                                                           "graph lived were written after their free")
    with pytest.raises(mlacheck.StrayWrite, match="written after their free") as e:
        with mlacheck.guard() as g:
            torch.ops.mlacheck_test.copy_rows(torch.ones(1, 4), torch.zeros(1, 4))
    assert g.calls == 1 and len(g.findings) == 1, g.findings
    assert e.value.call_file is None


def run_alloc_suite(tmp_path, *flags):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "..", "python"),
                                                       os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "mlacheck", "-p", "no:cacheprovider", "-q", "-rf",
                           os.path.join(HERE, "guard", "test_alloc_suite.py")] + list(flags), cwd=str(tmp_path),
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)


@cuda
def test_on_cuda_the_red_zone_allocator_finds_a_write_past_a_whole_tensor_and_a_replay_into_a_freed_block(tmp_path):
    pytest.importorskip("triton", reason="skipped: no Triton")
    plain = run_alloc_suite(tmp_path)
    assert "3 passed" in plain.stdout, plain.stdout  # the tests read only their outputs
    # The storage watch alone: the outputs are whole tensors, so there is no byte outside a view to
    # compare; the buggy kernel's row lands in what torch's caching allocator keeps past the tensor.
    watch = run_alloc_suite(tmp_path, "--mlacheck-guard")
    assert "3 passed" in watch.stdout, watch.stdout
    red = run_alloc_suite(tmp_path, "--mlacheck-guard-alloc")
    assert "2 failed, 1 passed" in red.stdout, red.stdout
    assert "argument 'out_ptr' (torch.float32[3, 4], strides (4, 1), storage offset 0) was written outside its " \
           "storage (48 bytes): 16 byte(s) of the guard allocator's red zones changed, the first 0 bytes past its " \
           "end, at element [3, 0] as if the view went on" in red.stdout, red.stdout
    assert "FAILED" in red.stdout and "test_a_graph_replayed_after_its_output_was_freed" in red.stdout, red.stdout
    assert "freed while a captured CUDA graph lived were written after their free" in red.stdout, red.stdout
    assert "CUDA tensors in red zones" in red.stdout, red.stdout
    saved = [f for f in os.listdir(os.path.join(str(tmp_path), "mlacheck-guard")) if "copy_rows" in f]
    assert len(saved) == 1, saved
    # The saved call reruns alone under the allocator (the record says it was made under it).
    p = subprocess.run([sys.executable, "-m", "mlacheck.rerun", os.path.join(str(tmp_path), "mlacheck-guard", saved[0])],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "..", "python"),
                                                                        os.path.join(HERE, "..", "..", "examples", "python"),
                                                                        os.environ.get("PYTHONPATH", "")])))
    assert p.returncode == 1 and "at element [3, 0] as if the view went on" in p.stdout, p.stdout


# ---- scripts/upstream_guard.sh: vLLM's own top-k test file under the guard (run on a GPU) ----------
def test_the_upstream_guard_script_says_what_is_missing_in_one_line(tmp_path):
    script = os.path.join(HERE, "..", "..", "scripts", "upstream_guard.sh")
    for args, said in (([], "give build [DIR] or run DIR MODE"),
                       (["run", str(tmp_path), "plain"], "has no libvllm_topk_clean.so"),
                       (["run", str(tmp_path)], "run DIR MODE")):
        p = subprocess.run(["bash", script] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        assert p.returncode != 0 and said in p.stdout and len(p.stdout.strip().splitlines()) == 1, (args, p.stdout)


def test_the_shims_of_vllms_modules_answer_from_torch():
    import importlib.util
    shims = os.path.join(HERE, "..", "..", "examples", "upstream", "guard_shims")

    def load(name):
        spec = importlib.util.spec_from_file_location("shim_" + name, os.path.join(shims, name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    platform = load("platforms").current_platform
    assert platform.is_cuda() == (torch.cuda.is_available() and torch.version.hip is None)
    assert not platform.is_rocm() or torch.version.hip is not None
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        assert platform.has_device_capability(major * 10 + minor) and not platform.has_device_capability(major * 10 + 10)
        assert platform.is_device_capability_family(major * 10)
    else:
        assert not platform.has_device_capability(70) and not platform.is_device_capability_family(90)
    utils = load("torch_utils")
    utils.set_random_seed(7)
    a = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(a, torch.rand(3))


def test_a_call_of_an_op_an_adapter_maps_is_saved_as_an_mlacheck_case_too(tmp_path):
    import vllm_like_ops  # noqa: F401  (registers _C::top_k_per_row_decode on the CPU)
    torch.manual_seed(3)
    logits = torch.randn(4, 40)[:, 3:35]          # rows of a wider buffer: a lead and a row pad
    seq_lens = torch.tensor([20, 32], dtype=torch.int32)
    buf = torch.zeros(6, 8, dtype=torch.int32)    # the output: rows 1..4 of a 6-row buffer
    with pytest.raises(mlacheck.StrayWrite) as e:
        with mlacheck.guard(save=str(tmp_path)):
            torch.ops._C.top_k_per_row_decode(logits, 2, seq_lens, buf[1:5], 4, logits.stride(0), logits.stride(1), 8)
    text = str(e.value)
    assert "as an mlacheck case too: " in text, text
    case = text.split("as an mlacheck case too: ")[1].split(";")[0].strip()
    body = open(case).read()
    for line in ("lengths decode-1d", "k 8", "next_n 2", "rows 4", "cols 32", "seq_lens 20 32", "logits_lead 3",
                 "logits_row_pad 8", "out_rows_before 1", "out_rows_after 1", "out_row_pad 0"):
        assert "\n" + line + "\n" in body, (line, body)
    assert "values_0 %s " % ("%.9g" % float(logits[0, 0])) in body, body
    # The case reads back and runs: mlacheck's reference passes it (the bug is the op's, not the case's).
    p = subprocess.run([mlacheck.binary(), "repro", case, "--impl", "topk_decode@ref"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    assert p.returncode == 0 and "PASS" in p.stdout, p.stdout
    # The prefill op: row starts and ends, each row's values from its start. (A fresh output: the row
    # past the view already holds what the bug writes there, and a write of the same bytes is unseen.)
    buf = torch.zeros(6, 8, dtype=torch.int32)
    ks = torch.tensor([2, 0, 10, 5], dtype=torch.int32)
    ke = torch.tensor([30, 32, 12, 5], dtype=torch.int32)
    with pytest.raises(mlacheck.StrayWrite) as e:
        with mlacheck.guard(save=str(tmp_path)):
            torch.ops._C.top_k_per_row_prefill(logits, ks, ke, buf[1:5], 4, logits.stride(0), logits.stride(1), 8)
    case = str(e.value).split("as an mlacheck case too: ")[1].split(";")[0].strip()
    body = open(case).read()
    for line in ("property topk_prefill.rows_admissible", "lengths prefill", "ks 2 0 10 5", "ke 30 32 12 5",
                 "logits_lead 3", "out_rows_before 1"):
        assert "\n" + line + "\n" in body, (line, body)
    assert "\nvalues_2 %s %s\n" % ("%.9g" % float(logits[2, 10]), "%.9g" % float(logits[2, 11])) in body, body
    assert "\nvalues_3\n" in body, body  # an empty row
    p = subprocess.run([mlacheck.binary(), "repro", case, "--impl", "topk_prefill@ref"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    assert p.returncode == 0 and "PASS" in p.stdout, p.stdout
    # A call the format cannot hold says why, and the call is still saved.
    from mlacheck.adapters import guard_cases
    text, why = guard_cases.case_of("_C::top_k_per_row_decode", dict(
        logits=torch.zeros(1, 70000), next_n=1, seq_lens=torch.tensor([70000]), indices=torch.zeros(1, 8, dtype=torch.int32),
        topK=8))
    assert text is None and "a row of 70000 values, more than a case line holds" in why, why
    text, why = guard_cases.case_of("_C::top_k_per_row_prefill", dict(
        logits=torch.zeros(2, 16), rowStarts=torch.tensor([0, 9]), rowEnds=torch.tensor([4, 20]),
        indices=torch.zeros(2, 8, dtype=torch.int32), topK=8))
    assert text is None and "a row's [start, end) lies outside [0, 16]" in why, why
