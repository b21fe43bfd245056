"""A reproducer for vLLM maintainers, without mlacheck: vLLM's compiled `top_k_per_row_decode`
(torch.ops._C, the wheel's vllm/_C_stable_libtorch.abi3.so) on logits whose columns are not
contiguous (docs/findings.md 16, vLLM 0.29.0).

The op takes the column stride (stride1) and reads every logit through it below 200,000 columns.
From 200,000 columns (kSplitWorkThreshold) each row is split over 10 blocks, and a block whose
piece of the row holds at most k keys takes topKPerRowJob's short-row shortcut, which records its
candidates' logits as logits[rowIt + rowStart], not logits[(rowIt + rowStart) * stride1]
(csrc/libtorch_stable/sampler.cu); the merge then ranks candidates by values read from the wrong
columns. Each test takes rows of 15 to 60 keys, k 5, as a view [:, ::stride] of a wider tensor whose
other columns hold 1e6 (values that must never be read), and compares each row's set with
torch.topk's.

    pytest -q -rs examples/upstream/test_vllm_topk_split_col_stride.py [--lib PATH]

The library: $VLLM_TOPK_LIB, else mlacheck's upstream cache (bash scripts/upstream_cache.sh
--compiled). Needs a CUDA GPU and torch; skips with the reason otherwise. Expected on 0.29.0: the
stride-6 case at 200,000 columns fails, the three others pass.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _library():
    path = os.environ.get("VLLM_TOPK_LIB")
    if not path:
        sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "mlacheck", "adapters"))
        try:
            import vllm_release  # the pinned release's unpacked tree (python/upstream.lock)
            path = os.path.join(vllm_release.source_root(), "vllm", "_C_stable_libtorch.abi3.so")
        except Exception as e:  # noqa: BLE001 - any reason the cache is not there is a skip reason
            return None, "skipped: no library (set VLLM_TOPK_LIB; %s)" % e
    if not os.path.isfile(path):
        return None, "skipped: no library at %s (set VLLM_TOPK_LIB, or bash scripts/upstream_cache.sh --compiled)" % path
    return path, None


def _ops():
    try:
        import torch
    except ImportError:
        pytest.skip("skipped: no torch")
    if not torch.cuda.is_available():
        pytest.skip("skipped: no GPU")
    path, why = _library()
    if why:
        pytest.skip(why)
    torch.ops.load_library(path)
    return torch, torch.ops._C


@pytest.mark.parametrize("cols, stride", [(100000, 1), (100000, 6), (200000, 1), (200000, 6)])
def test_each_row_gets_its_k_largest(cols, stride):
    """Fails on vLLM 0.29.0 at 200,000 columns and column stride 6 only."""
    torch, ops = _ops()
    torch.manual_seed(0)
    k, seq_lens = 5, [15, 20, 33, 60]
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
        got, want = sorted(out[r].tolist()), sorted(torch.topk(logits[r, :n], k).indices.tolist())
        if got != want:
            wrong.append("row %d (%d keys): got %s, the k largest are %s" % (r, n, got, want))
    assert not wrong, "; ".join(wrong)
