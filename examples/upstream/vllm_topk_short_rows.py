"""A reproducer for vLLM maintainers, without mlacheck: vLLM's compiled `top_k_per_row_decode`
(torch.ops._C, from the wheel's vllm/_C_stable_libtorch.abi3.so) on rows shorter than k, on each
of its three paths (insertion sort under 12,288 columns, radix sort under 200,000, split over 10
blocks and merged above). A row of n < k keys must come back as its indices [0, n) in any order,
then -1 (sparse_attn_indexer.py reads -1 as "no token"); a longer row as the indices of its k
largest logits. docs/findings.md (6) says what it shows: from 200,000 columns and for k up to about
205, positions past n hold an uninitialized index (0 on an H200) instead of -1.

    python examples/upstream/vllm_topk_short_rows.py [PATH/_C_stable_libtorch.abi3.so]

Without an argument the library comes from mlacheck's upstream cache (bash
scripts/upstream_cache.sh --compiled). Needs a CUDA GPU and torch. Exit 1 when a row is wrong.
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


def wrong_rows(ops, cols, k, next_n, seq_lens, fill):
    rows = len(seq_lens) * next_n
    logits = torch.randn(rows, cols, device="cuda")
    lens = torch.tensor(seq_lens, dtype=torch.int32, device="cuda")
    out = torch.full((rows, k), fill, dtype=torch.int32, device="cuda")
    # As model_executor/layers/sparse_attn_indexer.py calls it.
    ops.top_k_per_row_decode(logits, next_n, lens, out, rows, logits.stride(0), logits.stride(1), k)
    torch.cuda.synchronize()
    wrong = []
    for r in range(rows):
        n = max(0, min(cols, seq_lens[r // next_n] - next_n + r % next_n + 1))  # row r's keys
        got = out[r].tolist()
        if n <= k:
            ok = sorted(got[:n]) == list(range(n)) and all(v == -1 for v in got[n:])
        else:
            ok = set(got) == set(torch.topk(logits[r, :n], k).indices.tolist())
        if not ok:
            wrong.append((r, n, got[:12]))
    return rows, wrong


def main():
    if not torch.cuda.is_available():
        print("vllm_topk_short_rows.py: needs a CUDA GPU")
        return 2
    path = library_path()
    if not os.path.isfile(path):
        print("vllm_topk_short_rows.py: no library at %s (bash scripts/upstream_cache.sh --compiled)" % path)
        return 2
    torch.ops.load_library(path)
    ops = torch.ops._C
    torch.manual_seed(0)
    bad = 0
    for cols in (8192, 100000, 203198, 262144):
        for k in (5, 64, 227, 228, 512, 2048):
            for next_n in (1, 2):
                for fill in (0x7EADBEEF, -7):  # what out held before: the wrong entries do not come from it
                    rows, wrong = wrong_rows(ops, cols, k, next_n, [3, 2, 1, 17, 100, 5000, 2, 9], fill)
                    bad += bool(wrong)
                    first = " first: row %d (%d keys) %s" % wrong[0] if wrong else ""
                    print("%s cols %d k %d next_n %d out filled with %d: %d of %d rows wrong%s"
                          % ("BAD" if wrong else "OK ", cols, k, next_n, fill, len(wrong), rows, first), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
