"""mlacheck adapters for vLLM's compiled CUDA top-k kernels, taken from the pinned release's wheel
(python/upstream.lock, vLLM 0.29.0) as it ships: the library vllm/_C_stable_libtorch.abi3.so, built
on PyTorch's stable C ABI, so it loads into the torch 2.11 of mlacheck's environment though the
release pins 2.13 (its 88 torch symbols are all in 2.11; loaded and called on an H200, 2026-11-29).
cuda backend only; nothing of vLLM is copied here.

    bash scripts/upstream_cache.sh --compiled      # once: the library into the upstream cache (81 MB)
    mlacheck check --backend cuda --python python/mlacheck/adapters/vllm_cuda.py:top_k_per_row_decode --budget 60

| callable | op | drives (vllm-0.29.0/...) |
|---|---|---|
| top_k_per_row_decode | topk_decode | torch.ops._C.top_k_per_row_decode (csrc, registered by the library), as model_executor/layers/sparse_attn_indexer.py calls it (657-666) |
| top_k_per_row_prefill | topk_prefill | torch.ops._C.top_k_per_row_prefill, as sparse_attn_indexer.py calls it (509-518) |

Each maps mlacheck's arguments onto the op's (numRows = the logits' rows, its strides, topK = k) and
computes nothing. Each declares what sparse_attn_indexer.py guarantees it (docs/findings.md 6):
- `out contiguous`: the op takes no output stride; the caller hands it `topk_indices_buffer[:rows,
  :topk_tokens]`, rows of exactly k;
- `finite`: the logits come from the indexer's fp8 MQA kernel, finite (no NaN rows);
- `seq_lens >= next_n` (decode): every token sees at least itself, so no row is empty;
- `ties any`: the op promises no order among equal logits, nor the same choice launch to launch.
Run on an H200 under these (2026-11-29, as MLACHECK_PYTHON_CONTRACT), the decode op FAILs only on
finding 6's short rows of the split path (corpus regression V5); the prefill op also on rows of
length 0 (ks = ke), which its caller does not hand it.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_release  # noqa: E402
from vllm_release import implements  # noqa: E402

LIBRARY = "vllm/_C_stable_libtorch.abi3.so"
_loaded = False

# What the adapters need, said once when the module is imported (mlacheck then stops with this one
# line, exit 2): the compiled library in the upstream cache, and a GPU for it to run on.
_PATH = os.path.join(vllm_release.source_root(), LIBRARY)
if not os.path.isfile(_PATH):
    raise vllm_release.MissingRelease(
        "%s is not in the upstream cache (bash scripts/upstream_cache.sh --compiled puts it there)" % _PATH)
if not torch.cuda.is_available():
    raise RuntimeError("vllm_cuda.py drives vLLM's compiled CUDA kernels: it needs a GPU (--backend cuda)")


def vllm_ops():
    """torch.ops._C with the release's library loaded (once per process)."""
    global _loaded
    if not _loaded:
        torch.ops.load_library(_PATH)
        _loaded = True
    return torch.ops._C


DECODE_CONTRACT = ["out contiguous", "finite", "seq_lens >= next_n", "ties any"]
PREFILL_CONTRACT = ["out contiguous", "finite", "ties any"]


@implements("topk_decode", contract=DECODE_CONTRACT)
def top_k_per_row_decode(logits, next_n, seq_lens, k, out):
    """sparse_attn_indexer.py 657-666: (logits, next_n, seq_lens, topk_indices, num_rows,
    logits.stride(0), logits.stride(1), topk_tokens)."""
    if logits.shape[0] == 0:
        return None
    vllm_ops().top_k_per_row_decode(logits, int(next_n), seq_lens, out, logits.shape[0], logits.stride(0),
                                    logits.stride(1), int(k))
    return None


@implements("topk_prefill", contract=PREFILL_CONTRACT)
def top_k_per_row_prefill(logits, ks, ke, k, out):
    """sparse_attn_indexer.py 509-518: (logits, cu_seqlen_ks, cu_seqlen_ke, topk_indices, num_rows,
    logits.stride(0), logits.stride(1), topk_tokens)."""
    if logits.shape[0] == 0:
        return None
    vllm_ops().top_k_per_row_prefill(logits, ks, ke, out, logits.shape[0], logits.stride(0), logits.stride(1),
                                     int(k))
    return None
