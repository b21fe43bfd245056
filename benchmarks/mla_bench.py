#!/usr/bin/env python3
"""The MLA attention kernels on a GPU beside PyTorch, at DeepSeek-V3.2 decode shapes, in one process.

sparse  mlacheck's sparse MLA decode (docs/ops.md 4: 656-byte fp8_ds_mla tokens, h = 128, topk = 2048,
        b query tokens) vs a torch expression: gather the slots, decode fp8 x tile scales and the
        bf16 rope, bf16 matmuls, softmax in fp32.
dense   mlacheck's split-KV dense MLA decode (docs/ops.md 5: fp8 KV with a per-tensor k_scale, bf16 q,
        H = 128, every request at one context length, q_len 1 or 2, split count from mlacheck's
        heuristic) vs a torch expression: gather the pages, dequantize to bf16, bf16 einsums with
        the causal mask, softmax in fp32.
Both sides read the same device memory: mlacheck's kernels run through libmlacheck_torch_bench.so
(benchmarks/torch_bench_shim.cu) on the torch tensors' pointers. Times are medians of CUDA-event
timed calls after a warm-up. The floor of an op is the larger of (bytes it must move / the measured
copy bandwidth) and (FLOPs / the measured bf16 GEMM peak: the products are bf16 x bf16 after
dequantization, as FlashMLA computes them); "of floor" is floor / time.

Checks (printed; exit status 1 if one fails): out within 2e-2 of the largest |out| of torch's
(torch rounds P and K to bf16), lse within 1e-2.

  python3 benchmarks/mla_bench.py --lib build/torch-bench/benchmarks/libmlacheck_torch_bench.so
"""
import argparse
import ctypes
import json
import sys
import time

from bench_common import machine_limits, median_ms, open_bench

PAGE = 64
H = 128
TOPK = 2048


def load_lib(path):
    lib = ctypes.CDLL(path)
    lib.mlacheck_bench_device_name.restype = ctypes.c_char_p
    i64, vp, ci, cp, d = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_double
    lib.mlacheck_bench_sparse_mla.restype = d
    lib.mlacheck_bench_sparse_mla.argtypes = [vp, i64, i64, i64, vp, i64, i64, vp, i64, d, vp, vp, ci, cp, ci]
    lib.mlacheck_bench_mla_decode.restype = d
    lib.mlacheck_bench_mla_decode.argtypes = [vp, ci, i64, i64, i64, vp, ci, i64, i64, vp, i64, vp, i64, d, d, d, i64,
                                              vp, i64, vp, vp, ctypes.POINTER(i64), ci, cp, ci]
    return lib


def errors(torch, out, lse, ref_out, ref_lse):
    scale = ref_out.float().abs().max().item()
    err_out = (out.float() - ref_out.float()).abs().max().item() / scale
    err_lse = (lse - ref_lse).abs().max().item()
    return err_out, err_lse


def sparse_case(torch, lib, b, iters, gen, err):
    num_blocks = 4096  # 262144 slots, 172 MB of cache
    slots = num_blocks * PAGE
    kv = torch.empty(num_blocks, PAGE, 656, dtype=torch.uint8, device="cuda")
    latent = (torch.randn(num_blocks, PAGE, 512, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    scales = torch.rand(num_blocks, PAGE, 4, device="cuda", generator=gen) * 0.04 + 0.01
    rope = torch.randn(num_blocks, PAGE, 64, device="cuda", generator=gen).bfloat16()
    kv[..., :512] = latent.view(torch.uint8)
    kv[..., 512:528] = scales.view(torch.uint8).view(num_blocks, PAGE, 16)
    kv[..., 528:] = rope.view(torch.uint8).view(num_blocks, PAGE, 128)
    q = torch.randn(b, 1, H, 576, device="cuda", generator=gen).bfloat16()
    idx = torch.randint(0, slots, (b, 1, TOPK), device="cuda", generator=gen, dtype=torch.int32)
    scale = 192 ** -0.5
    out = torch.empty(b, 1, H, 512, device="cuda", dtype=torch.bfloat16)
    lse = torch.empty(b, H, 1, device="cuda")
    torch.cuda.synchronize()
    ms = lib.mlacheck_bench_sparse_mla(q.data_ptr(), b, 1, H, kv.data_ptr(), num_blocks, PAGE, idx.data_ptr(), TOPK,
                                       scale, out.data_ptr(), lse.data_ptr(), iters, err, len(err))
    if ms < 0:
        raise RuntimeError(f"sparse: {err.value.decode()}")

    flat = kv.view(slots, 656)

    def torch_sparse():
        tok = flat[idx.view(-1).long()].view(b, TOPK, 656)
        lat = tok[..., :512].contiguous().view(torch.float8_e4m3fn).float().view(b, TOPK, 4, 128)
        sc = tok[..., 512:528].contiguous().view(torch.float32).view(b, TOPK, 4, 1)
        rp = tok[..., 528:].contiguous().view(torch.bfloat16).float()
        k = torch.cat([(lat * sc).view(b, TOPK, 512), rp], dim=-1).bfloat16()
        s = torch.matmul(q[:, 0], k.transpose(1, 2)).float() * scale  # [b, H, topk]
        l = torch.logsumexp(s, dim=-1)
        o = torch.matmul(torch.softmax(s, dim=-1).bfloat16(), k[..., :512])
        return o, l

    torch_ms = median_ms(torch, torch_sparse, iters)
    ref_out, ref_lse = torch_sparse()
    err_out, err_lse = errors(torch, out[:, 0], lse[:, :, 0], ref_out, ref_lse)
    flops = 2.0 * b * H * TOPK * (576 + 512)
    bytes_moved = b * TOPK * 656 + q.numel() * 2 + out.numel() * 2 + idx.numel() * 4
    return ms, torch_ms, flops, bytes_moved, err_out, err_lse


def dense_case(torch, lib, B, ctx, q_len, iters, gen, err, workspace):
    W = (ctx + PAGE - 1) // PAGE
    num_blocks = B * W
    kv = torch.empty(num_blocks, PAGE, 576, dtype=torch.uint8, device="cuda")
    step = 4096
    for b0 in range(0, num_blocks, step):
        b1 = min(num_blocks, b0 + step)
        kv[b0:b1] = (torch.randn(b1 - b0, PAGE, 576, device="cuda", generator=gen) * 0.5).to(
            torch.float8_e4m3fn).view(torch.uint8)
    table = torch.randperm(num_blocks, device="cuda", generator=gen).to(torch.int32).view(B, W)
    lens = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
    q = torch.randn(B, q_len, H, 576, device="cuda", generator=gen).bfloat16()
    base, q_scale, k_scale = 192 ** -0.5, 1.0, 0.75
    o = torch.empty(B, q_len, H, 512, device="cuda", dtype=torch.bfloat16)
    lse = torch.empty(B, q_len, H, device="cuda")
    splits = ctypes.c_int64(0)
    torch.cuda.synchronize()
    ms = lib.mlacheck_bench_mla_decode(q.data_ptr(), 0, B, q_len, H, kv.data_ptr(), 1, num_blocks, PAGE,
                                       table.data_ptr(), W, lens.data_ptr(), ctx, base, q_scale, k_scale, 0,
                                       workspace.data_ptr(), workspace.numel() * 4, o.data_ptr(), lse.data_ptr(),
                                       ctypes.byref(splits), iters, err, len(err))
    if ms < 0:
        raise RuntimeError(f"dense: {err.value.decode()}")

    chunk = max(1, (1 << 30) // (q_len * H * ctx * 4))
    ref_o = torch.empty_like(o)
    ref_lse = torch.empty_like(lse)
    # Causal: token t of a request sees keys [0, ctx - q_len + t + 1).
    col = torch.arange(ctx, device="cuda")
    visible = col[None, :] < (ctx - q_len + 1 + torch.arange(q_len, device="cuda"))[:, None]  # [q_len, ctx]

    def torch_dense():
        for b0 in range(0, B, chunk):
            b1 = min(B, b0 + chunk)
            k = kv[table[b0:b1].long()].view(b1 - b0, W * PAGE, 576)[:, :ctx]
            k = (k.view(torch.float8_e4m3fn).float() * k_scale).bfloat16()
            s = torch.einsum("bqhd,bkd->bqhk", q[b0:b1], k).float() * (base * q_scale)
            s.masked_fill_(~visible[None, :, None, :], float("-inf"))
            ref_lse[b0:b1] = torch.logsumexp(s, dim=-1)
            ref_o[b0:b1] = torch.einsum("bqhk,bkd->bqhd", torch.softmax(s, dim=-1).bfloat16(), k[..., :512])

    torch_ms = median_ms(torch, torch_dense, max(2, iters // 2))
    torch_dense()
    err_out, err_lse = errors(torch, o, lse, ref_o, ref_lse)
    flops = 2.0 * B * q_len * H * ctx * (576 + 512)
    bytes_moved = B * ctx * 576 + q.numel() * 2 + o.numel() * 2
    return ms, torch_ms, flops, bytes_moved, err_out, err_lse, splits.value


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="path to libmlacheck_torch_bench.so")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--batches", default="32,128")
    ap.add_argument("--contexts", default="8192,65536")
    ap.add_argument("--q-lens", default="1,2")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    opened = open_bench(args.lib, load_lib, "mla_bench")
    if isinstance(opened, int):
        return opened
    torch, lib, name, err = opened
    bw, peaks = machine_limits(torch, 10)
    peak = peaks["bf16"]
    print(f"{name}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}: copy bandwidth {bw / 1e9:.0f} GB/s "
          f"(read + write), bf16 GEMM peak {peak / 1e12:.0f} TFLOP/s; H = {H}, pages of {PAGE}, "
          f"median of {args.iters}")
    print(f"{'op':<7} {'B':>4} {'q':>2} {'context':>7} {'splits':>6}  {'mlacheck ms':>11} {'TFLOP/s':>8} "
          f"{'of floor':>8}  {'torch ms':>9} {'torch/ours':>10}  check")
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    rows, failures = [], 0
    batches = [int(x) for x in args.batches.split(",")]

    def report(op, B, q_len, ctx, splits, ms, torch_ms, flops, bytes_moved, err_out, err_lse):
        nonlocal failures
        ok = err_out < 2e-2 and err_lse < 1e-2
        failures += not ok
        floor_ms = max(bytes_moved / bw, flops / peak) * 1e3
        row = dict(op=op, B=B, q_len=q_len, context=ctx, splits=splits, ms=ms, tflops=flops / (ms * 1e-3) / 1e12,
                   of_floor=floor_ms / ms, torch_ms=torch_ms, err_out=err_out, err_lse=err_lse, ok=ok)
        rows.append(row)
        print(f"{op:<7} {B:>4} {q_len:>2} {ctx:>7} {splits:>6}  {ms:>11.3f} {row['tflops']:>8.1f} "
              f"{row['of_floor']:>8.3f}  {torch_ms:>9.3f} {torch_ms / ms:>9.2f}x  out err {err_out:.1e}, lse err "
              f"{err_lse:.1e}{'' if ok else '  FAIL'}", flush=True)

    for b in batches:
        ms, torch_ms, flops, bytes_moved, e_o, e_l = sparse_case(torch, lib, b, args.iters, gen, err)
        report("sparse", b, 1, TOPK, "-", ms, torch_ms, flops, bytes_moved, e_o, e_l)
        torch.cuda.empty_cache()
    q_lens = [int(x) for x in args.q_lens.split(",")]
    workspace = torch.empty(max(batches) * max(q_lens) * H * 64 * 513, device="cuda")  # kMlaMaxSplits rows
    for B in batches:
        for ctx in [int(x) for x in args.contexts.split(",")]:
            for q_len in q_lens:
                ms, torch_ms, flops, bytes_moved, e_o, e_l, splits = dense_case(torch, lib, B, ctx, q_len, args.iters,
                                                                                gen, err, workspace)
                report("dense", B, q_len, ctx, splits, ms, torch_ms, flops, bytes_moved, e_o, e_l)
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=name, torch=torch.__version__, copy_bandwidth=bw, peaks=peaks, rows=rows), f, indent=1)
    print(f"mla_bench: {len(rows)} rows, {failures} failing checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
