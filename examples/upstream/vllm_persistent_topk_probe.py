"""A reproducer for vLLM maintainers, without mlacheck: vLLM's compiled `persistent_topk` and
`cooperative_topk` (torch.ops._C, from the wheel's vllm/_C_stable_libtorch.abi3.so), the decode
top-k that DeepSeek V3.2's indexer runs for index_topk 512, 1024 and 2048 (sparse_attn_indexer.py
616-656), called as that caller calls them, on rows of logits of four kinds:

- normal:    normal(0, 1)
- ulps:      1 + j ulps, j < 256 (every logit the same fp16 value)
- fp16grid:  1 + j 2^-20, j < 4096 (five fp16 values)
- narrow:    1 + j 2^-23, j < 2^20 (the range [1, 1.125): 128 fp16 values)

Each row is judged as an admissible top-k: k distinct indices in [0, length), none of a value below
the row's k-th largest, and every value above it taken. Printed per configuration: the kernel the
launcher picks (persistent_topk: at most 32 rows its own per-row paths, more rows FlashInfer's
FilteredTopK on a GPU with 128 KB of shared memory per block), the shape, the values, the wrong
rows and, for the first, how many taken values lie below the k-th value. docs/findings.md (7) has
what an H100 printed.

    python examples/upstream/vllm_persistent_topk_probe.py [PATH/_C_stable_libtorch.abi3.so]

Without an argument the library comes from mlacheck's upstream cache (bash
scripts/upstream_cache.sh --compiled). Needs a CUDA GPU (sm90 for cooperative_topk) and torch.
Exit 1 when a row is wrong.
"""
import os
import sys

import torch

WORKSPACE_BYTES = 1024 * 1024  # RADIX_TOPK_WORKSPACE_SIZE, sparse_attn_indexer.py 42


def library_path():
    if len(sys.argv) > 1:
        return sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "python", "mlacheck", "adapters"))
    import vllm_release  # the pinned release's unpacked tree (python/upstream.lock)
    return os.path.join(vllm_release.source_root(), "vllm", "_C_stable_libtorch.abi3.so")


def values(kind, rows, n, gen):
    if kind == "normal":
        return torch.randn(rows, n, generator=gen)
    if kind == "ulps":
        return (torch.randint(0, 256, (rows, n), generator=gen) + 0x3F800000).int().view(torch.float32)
    if kind == "fp16grid":
        return 1.0 + torch.randint(0, 4096, (rows, n), generator=gen).float() * 2.0 ** -20
    return 1.0 + torch.randint(0, 1 << 20, (rows, n), generator=gen).float() * 2.0 ** -23


def run(ops, op, rows, n, k, kind, gen, workspace):
    logits = values(kind, rows, n, gen).cuda()  # contiguous: row stride n (a multiple of 4 here)
    lens = torch.full((rows, 1), n, dtype=torch.int32, device="cuda")  # seq_lens [B, 1], as the caller's
    out = torch.full((rows, k), -7, dtype=torch.int32, device="cuda")
    if op == "persistent_topk":
        ops.persistent_topk(logits, lens, out, workspace, k, logits.shape[1])
    else:
        ops.cooperative_topk(logits, lens, out, workspace, k, n)  # max_seq_len: the longest row
    torch.cuda.synchronize()
    kth = torch.topk(logits, k, dim=1).values[:, -1:]
    above = (logits > kth).sum(1)
    idx = out.long()
    in_range = ((idx >= 0) & (idx < n)).all(1)
    taken = torch.gather(logits, 1, idx.clamp(0, n - 1))
    distinct = torch.tensor([len(set(r)) == k for r in out.tolist()], device="cuda")
    ok = in_range & distinct & (taken >= kth).all(1) & ((taken > kth).sum(1) == above)
    wrong = int((~ok).sum())
    first = ""
    if wrong:
        r = int((~ok).nonzero()[0])
        first = "  row %d: %d of the %d taken below the k-th value, %d of the %d above it taken" % (
            r, int((taken[r] < kth[r]).sum()), k, int((taken[r] > kth[r]).sum()), int(above[r]))
    return wrong, first


def main():
    if not torch.cuda.is_available():
        print("vllm_persistent_topk_probe.py: needs a CUDA GPU")
        return 2
    path = library_path()
    if not os.path.isfile(path):
        print("vllm_persistent_topk_probe.py: no library at %s (bash scripts/upstream_cache.sh --compiled)" % path)
        return 2
    torch.ops.load_library(path)
    ops = torch.ops._C
    workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    gen = torch.Generator().manual_seed(2)
    configs = [("persistent_topk", 4, n, 512, "ulps") for n in (3708, 3709, 4096)]  # the 3,708-slot buffer
    for kind in ("normal", "ulps", "fp16grid", "narrow"):
        for n, k in ((1768, 512), (8000, 2048), (30000, 2048)):
            configs += [("persistent_topk", 40, n, k, kind), ("persistent_topk", 8, n, k, kind),
                        ("cooperative_topk", 8, n, k, kind)]
    bad = 0
    print("%-16s %4s %6s %5s %-8s %s" % ("op", "rows", "length", "k", "logits", "wrong rows"))
    for op, rows, n, k, kind in configs:
        wrong, first = run(ops, op, rows, n, k, kind, gen, workspace)
        bad += wrong > 0
        print("%-16s %4d %6d %5d %-8s %d of %d%s" % (op, rows, n, k, kind, wrong, rows, first), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
