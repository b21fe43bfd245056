"""Shared by the PyTorch-side benchmarks: setup, CUDA-event timing and the machine's measured limits."""
import ctypes
import sys


def open_bench(lib_path, load_lib, tool):
    """(torch, lib, device name, error buffer), or an exit status: 2 without PyTorch, 77 (after
    printing "skipped: no GPU") without a usable GPU."""
    try:
        import torch
    except ImportError:
        print(f"{tool}: PyTorch is not installed", file=sys.stderr)
        return 2
    lib = load_lib(lib_path)
    name = lib.mlacheck_bench_device_name().decode()
    if not name or not torch.cuda.is_available():
        print("skipped: no GPU")
        return 77
    return torch, lib, name, ctypes.create_string_buffer(512)


def median_ms(torch, fn, iters):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def machine_limits(torch, iters):
    """Copy bandwidth (bytes/s, read + write of a 2 GiB device-to-device copy) and peak FLOP/s of an
    8192^3 GEMM: {"bf16": ..., "fp8": ...} (fp8 through torch._scaled_mm; absent where unavailable)."""
    n = 2 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = median_ms(torch, lambda: dst.copy_(src), iters)
    del src, dst
    m = 8192
    a = torch.randn(m, m, device="cuda")
    b = torch.randn(m, m, device="cuda")
    a16, b16 = a.bfloat16(), b.bfloat16()
    peaks = {"bf16": 2 * m ** 3 / (median_ms(torch, lambda: a16 @ b16, iters) * 1e-3)}
    try:
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        gemm = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        peaks["fp8"] = 2 * m ** 3 / (median_ms(torch, gemm, iters) * 1e-3)
    except Exception:  # noqa: BLE001 - any failure means no fp8 GEMM here
        pass
    return 2 * n / (copy_ms * 1e-3), peaks
