#!/usr/bin/env python3
"""The indexer kernels on a GPU beside PyTorch, at DeepSeek-V3.2 decode shapes, in one process.

For each shape (B requests, next_n query tokens each, H = 64 heads, D = 128, every request with the
same context length) it builds one block-flat fp8 indexer cache (pages of 64 tokens, shuffled over
the cache) and times, with CUDA events, median of --iters calls after a warm-up:
  paged logits  mlacheck's kernel (unclean mode)         vs a torch expression of docs/ops.md 2.1
  top-k decode  mlacheck's kernel on those logits, k=2048 vs torch.topk on the same logits
Both sides read the same device memory: mlacheck's kernels run through libmlacheck_torch_bench.so
(benchmarks/torch_bench_shim.cu) on the torch tensors' pointers.

The floor of an op is the larger of (bytes it must move / the measured copy bandwidth) and (FLOPs /
the measured peak): copy bandwidth from a 2 GiB device-to-device copy (read + write bytes), peak
from an 8192^3 fp8 matmul (torch._scaled_mm; a bf16 matmul when fp8 is unavailable). "of floor" is
floor / time: 1.0 would be a kernel at the machine's limit.

Checks (printed, and the exit status is 1 if one fails): mlacheck's logits equal the torch
expression within bf16 rounding, and every row's top-k values equal torch.topk's values.

  python3 benchmarks/indexer_bench.py --lib build/torch-bench/benchmarks/libmlacheck_torch_bench.so
"""
import argparse
import ctypes
import json
import sys
import time

from bench_common import machine_limits, median_ms, open_bench

BLOCK = 64
H, D, K = 64, 128, 2048


def load_lib(path):
    lib = ctypes.CDLL(path)
    lib.mlacheck_bench_device_name.restype = ctypes.c_char_p
    i64, vp, ci, cp = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    lib.mlacheck_bench_paged_logits.restype = ctypes.c_double
    lib.mlacheck_bench_paged_logits.argtypes = [vp, i64, i64, i64, i64, vp, i64, i64, i64, vp, vp, vp, i64, i64, vp,
                                                i64, ci, ci, cp, ci]
    lib.mlacheck_bench_topk_decode.restype = ctypes.c_double
    lib.mlacheck_bench_topk_decode.argtypes = [vp, i64, i64, i64, vp, i64, i64, i64, vp, vp, i64, ci, cp, ci]
    lib.mlacheck_bench_topk_workspace_bytes.restype = i64
    lib.mlacheck_bench_topk_workspace_bytes.argtypes = [i64, i64, i64]
    return lib


def make_cache(torch, B, ctx, gen):
    """Block-flat fp8 cache for B requests of ctx tokens: [num_blocks, 64 * (D + 4)] bytes (keys of
    the block's 64 tokens, then their fp32 scales), pages shuffled; the block table [B, W]."""
    W = (ctx + BLOCK - 1) // BLOCK
    num_blocks = B * W
    cache = torch.empty(num_blocks, BLOCK * (D + 4), dtype=torch.uint8, device="cuda")
    step = 8192
    for b0 in range(0, num_blocks, step):
        b1 = min(num_blocks, b0 + step)
        keys = (torch.randn(b1 - b0, BLOCK * D, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
        scales = torch.rand(b1 - b0, BLOCK, device="cuda", generator=gen) * 0.02 + 0.005
        cache[b0:b1, : BLOCK * D] = keys.view(torch.uint8)
        cache[b0:b1, BLOCK * D:] = scales.view(torch.uint8).view(b1 - b0, BLOCK * 4)
    table = torch.randperm(num_blocks, device="cuda", generator=gen).to(torch.int32).view(B, W)
    return cache, table


def torch_logits(torch, q, cache, table, weights, ctx, out, chunk):
    """docs/ops.md 2.1 in torch, every request at length ctx: logits[b*n + j, c] = scale_c *
    sum_h w[b*n + j, h] * relu(q[b, j, h] . k_c), with bf16 products, chunk requests at a time."""
    B, n = q.shape[0], q.shape[1]
    W = table.shape[1]
    for b0 in range(0, B, chunk):
        b1 = min(B, b0 + chunk)
        pages = cache[table[b0:b1].long()]  # [c, W, 64 * 132]
        keys = pages[:, :, : BLOCK * D].contiguous().view(torch.float8_e4m3fn).view(b1 - b0, W * BLOCK, D)[:, :ctx]
        scales = pages[:, :, BLOCK * D:].contiguous().view(torch.float32).view(b1 - b0, W * BLOCK)[:, :ctx]
        scores = torch.einsum("bnhd,bkd->bnhk", q[b0:b1].to(torch.bfloat16), keys.to(torch.bfloat16))
        w = weights.view(B, n, H)[b0:b1]
        logits = (scores.relu_().float() * w[..., None]).sum(dim=2) * scales[:, None, :]
        out.view(B, n, -1)[b0:b1, :, :ctx] = logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="path to libmlacheck_torch_bench.so")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--batches", default="32,128")
    ap.add_argument("--next-n", default="1,2")
    ap.add_argument("--contexts", default="8192,65536,163840")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()

    opened = open_bench(args.lib, load_lib, "indexer_bench")
    if isinstance(opened, int):
        return opened
    torch, lib, name, err = opened

    bw, peaks = machine_limits(torch, args.iters)
    peak_kind = "fp8" if "fp8" in peaks else "bf16"  # the logits' inputs are fp8
    peak = peaks[peak_kind]
    print(f"{name}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}: copy bandwidth {bw / 1e9:.0f} GB/s "
          f"(read + write), {peak_kind} GEMM peak {peak / 1e12:.0f} TFLOP/s; H = {H}, D = {D}, k = {K}, "
          f"pages of {BLOCK}, median of {args.iters}")
    header = (f"{'op':<13} {'B':>4} {'n':>2} {'context':>7}  {'mlacheck ms':>11} {'rate':>13} {'of floor':>8}  "
              f"{'torch ms':>9} {'torch/ours':>10}  check")
    print(header)
    rows_out, failures = [], 0
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    for B in [int(x) for x in args.batches.split(",")]:
        for ctx in [int(x) for x in args.contexts.split(",")]:
            cache, table = make_cache(torch, B, ctx, gen)
            for n in [int(x) for x in args.next_n.split(",")]:
                rows = B * n
                q = (torch.randn(B, n, H, D, device="cuda", generator=gen)).to(torch.float8_e4m3fn)
                weights = torch.randn(rows, H, device="cuda", generator=gen) * 0.1
                lens = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
                ours = torch.empty(rows, ctx, device="cuda")
                # mlacheck launches on its own stream: torch's queued work must be done first.
                torch.cuda.synchronize()
                ms = lib.mlacheck_bench_paged_logits(
                    q.data_ptr(), B, n, H, D, cache.data_ptr(), cache.shape[0], cache.shape[1], BLOCK,
                    weights.data_ptr(), lens.data_ptr(), table.data_ptr(), table.shape[1], ctx, ours.data_ptr(),
                    ctx, 0, args.iters, err, len(err))
                if ms < 0:
                    print(f"indexer_bench: paged logits: {err.value.decode()}", file=sys.stderr)
                    return 1
                ref = torch.empty(rows, ctx, device="cuda")
                chunk = max(1, (1 << 31) // (n * H * ctx * 2))
                torch_ms = median_ms(torch, lambda: torch_logits(torch, q, cache, table, weights, ctx, ref, chunk),
                                     max(3, args.iters // 3))
                # Row j of a request has ctx - n + j + 1 keys; past that the unclean kernel leaves garbage.
                col = torch.arange(ctx, device="cuda")[None, :]
                row_len = (ctx - n + 1 + torch.arange(rows, device="cuda") % n)[:, None]
                valid = col < row_len
                scale = ref.abs().where(valid, torch.zeros((), device="cuda")).max().item()
                err_rel = ((ours - ref).abs().where(valid, torch.zeros((), device="cuda")).max().item() / scale)
                ok = err_rel < 2e-2  # torch multiplies in bf16 (8 bits of mantissa); mlacheck in fp32
                failures += not ok
                kv_bytes = B * ctx * (D + 4)
                bytes_moved = kv_bytes + q.numel() + weights.numel() * 4 + rows * ctx * 4
                flops = 2.0 * rows * ctx * H * D
                floor_ms = max(bytes_moved / bw, flops / peak) * 1e3
                row = dict(op="paged_logits", B=B, next_n=n, context=ctx, ms=ms, tflops=flops / (ms * 1e-3) / 1e12,
                           gbps=bytes_moved / (ms * 1e-3) / 1e9, of_floor=floor_ms / ms, torch_ms=torch_ms,
                           check=f"max rel err {err_rel:.1e}", ok=ok)
                rows_out.append(row)
                print(f"{'paged_logits':<13} {B:>4} {n:>2} {ctx:>7}  {ms:>11.3f} {row['tflops']:>7.1f} TFLOP/s "
                      f"{row['of_floor']:>8.3f}  {torch_ms:>9.3f} {torch_ms / ms:>9.1f}x  {row['check']}"
                      f"{'' if ok else '  FAIL'}", flush=True)

                # Top-k over the same logits: mlacheck reads them unclean with seq_lens; torch gets them
                # masked to -inf past each row's length (the masking is not timed).
                masked = ours.masked_fill(~valid, float("-inf"))
                ws_bytes = lib.mlacheck_bench_topk_workspace_bytes(rows, K, ctx)
                ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device="cuda")
                idx = torch.empty(rows, K, dtype=torch.int32, device="cuda")
                torch.cuda.synchronize()
                ms = lib.mlacheck_bench_topk_decode(ours.data_ptr(), rows, ctx, ctx, lens.data_ptr(), B, n, K,
                                                    idx.data_ptr(), ws.data_ptr(), ws_bytes, args.iters, err, len(err))
                if ms < 0:
                    print(f"indexer_bench: top-k: {err.value.decode()}", file=sys.stderr)
                    return 1
                torch_ms = median_ms(torch, lambda: torch.topk(masked, K, dim=-1), args.iters)
                want = torch.topk(masked, K, dim=-1).values.sort(dim=-1).values
                got = masked.gather(1, idx.long().clamp(min=0)).sort(dim=-1).values
                ok = bool(torch.equal(got, want)) and bool((idx >= 0).all())
                failures += not ok
                bytes_moved = rows * ctx * 4 + rows * K * 4
                floor_ms = bytes_moved / bw * 1e3
                row = dict(op="topk_decode", B=B, next_n=n, context=ctx, ms=ms, gbps=bytes_moved / (ms * 1e-3) / 1e9,
                           of_floor=floor_ms / ms, torch_ms=torch_ms,
                           check="values = torch.topk" if ok else "values differ", ok=ok)
                rows_out.append(row)
                print(f"{'topk_decode':<13} {B:>4} {n:>2} {ctx:>7}  {ms:>11.3f} {row['gbps']:>9.0f} GB/s "
                      f"{row['of_floor']:>8.3f}  {torch_ms:>9.3f} {torch_ms / ms:>9.1f}x  {row['check']}"
                      f"{'' if ok else '  FAIL'}", flush=True)
                del ours, ref, masked, idx, ws
            del cache, table
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=name, torch=torch.__version__, copy_bandwidth=bw, peak=peak, peak_kind=peak_kind,
                           rows=rows_out), f, indent=1)
    print(f"indexer_bench: {len(rows_out)} rows, {failures} failing checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
