"""A reproducer for vLLM maintainers, without mlacheck: vLLM's compiled `top_k_per_row_decode`
(torch.ops._C, from the wheel's vllm/_C_stable_libtorch.abi3.so) on logits whose columns are not
contiguous. The op takes the column stride (stride1) and honours it below 200,000 columns; from
200,000 columns each row is split over 10 blocks, and a block whose piece of the row holds at most
k keys takes topKPerRowJob's short-row shortcut, which records its candidates' logits as
logits[rowIt + rowStart] instead of logits[(rowIt + rowStart) * stride1]
(csrc/libtorch_stable/sampler.cu). The merge then ranks candidates by values read from the wrong
columns. docs/findings.md (16) says what mlacheck saw on an H100.

    python examples/upstream/vllm_topk_split_col_stride.py [PATH/_C_stable_libtorch.abi3.so]

Each case takes rows of 15 to 60 keys, k 5, as a view [:, ::stride] of a wider tensor whose other
columns hold 1e6 (values that must never be read), and compares the set returned with torch.topk's.
Without an argument the library comes from mlacheck's upstream cache (bash
scripts/upstream_cache.sh --compiled). Needs a CUDA GPU and torch. Exit 1 when a row is wrong, 2
when something it needs is missing.
"""
import os
import sys

import torch


def library_path():
    if len(sys.argv) > 1:
        return sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "python", "mlacheck", "adapters"))
    import vllm_release  # the pinned release's unpacked tree (python/upstream.lock)
    return os.path.join(vllm_release.source_root(), "vllm", "_C_stable_libtorch.abi3.so")


def wrong_rows(ops, cols, stride, k, seq_lens):
    rows = len(seq_lens)
    wide = torch.full((rows, cols * stride), 1e6, device="cuda")
    logits = wide[:, ::stride]  # stride(1) == stride; the 1e6 between must never be read
    logits.copy_(-torch.rand(rows, cols, device="cuda") * 10)  # negative logits, below every 1e6
    lens = torch.tensor(seq_lens, dtype=torch.int32, device="cuda")
    out = torch.full((rows, k), -7, dtype=torch.int32, device="cuda")
    # As model_executor/layers/sparse_attn_indexer.py calls it (next_n 1).
    ops.top_k_per_row_decode(logits, 1, lens, out, rows, logits.stride(0), logits.stride(1), k)
    torch.cuda.synchronize()
    wrong = []
    for r, n in enumerate(seq_lens):
        got = out[r].tolist()
        want = torch.topk(logits[r, :n], k).indices.tolist()
        if set(got) != set(want):
            wrong.append((r, n, got, sorted(want)))
    return wrong


def main():
    if not torch.cuda.is_available():
        print("vllm_topk_split_col_stride.py: needs a CUDA GPU")
        return 2
    path = library_path()
    if not os.path.isfile(path):
        print("vllm_topk_split_col_stride.py: no library at %s (bash scripts/upstream_cache.sh --compiled)" % path)
        return 2
    torch.ops.load_library(path)
    ops = torch.ops._C
    torch.manual_seed(0)
    bad = 0
    for cols in (100000, 200000):  # the radix path, then the split path
        for stride in (1, 6):
            wrong = wrong_rows(ops, cols, stride, 5, [15, 20, 33, 60])
            bad += bool(wrong)
            first = " first: row %d (%d keys) got %s, the k largest are %s" % wrong[0] if wrong else ""
            print("%s cols %d column stride %d: %d of 4 rows wrong%s"
                  % ("BAD" if wrong else "OK ", cols, stride, len(wrong), first), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
