"""mlacheck adapter for FlashMLA's sparse fp8 decode as vLLM's pinned release ships it
(python/upstream.lock, vLLM 0.29.0): the compiled library vllm/_flashmla_C.abi3.so (built on
PyTorch's stable C ABI; its 65 torch symbols are all in the torch 2.11 of mlacheck's environment)
and its Python interface vllm/third_party/flashmla/flash_mla_interface.py, both run as they ship.
cuda backend only; nothing of FlashMLA or vLLM is copied here.

    bash scripts/upstream_cache.sh --compiled      # once: the libraries into the upstream cache
    mlacheck check --backend cuda --python python/mlacheck/adapters/vllm_flashmla.py:sparse_decode --budget 60

| callable | op | drives (vllm-0.29.0/...) |
|---|---|---|
| sparse_decode | sparse_mla_decode | third_party/flashmla/flash_mla_interface.py `flash_mla_with_kvcache` (its sparse branch: torch.ops._flashmla_C.sparse_decode_fwd), as v1/attention/backends/mla/flashmla_sparse.py `FlashMLASparseImpl._fp8_flash_mla_kernel` calls it (847-882) |

The caller's arguments, mapped (nothing here computes a result):
- `k_cache = kv_c_and_k_pe_cache.view(torch.uint8).unsqueeze(-2)`: the fp8_ds_mla cache [blocks,
  page, 656] as [blocks, page, 1, 656];
- `indices = topk_indices` [b, s_q, topk], `softmax_scale = self.softmax_scale`, `head_dim_v=512`,
  `is_fp8_kvcache=True`, a fresh `get_mla_metadata()` per step (the builder makes one per build,
  503); block_table and cache_seqlens are ignored on the sparse path (the caller passes dummies);
- `attn_sink` as mlacheck gives it (DeepSeek V3.2's caller passes none; the interface takes one);
  no `topk_length` (below);
- no `out`: the caller lets FlashMLA allocate out and lse, so the adapter copies them into
  mlacheck's views. A write past out's or lse's view is therefore not seen here (FlashMLA writes
  its own tensors); every read of q, the cache and the indices is the kernel's own.

The contract is what the caller guarantees (flashmla_sparse.py):
- `clean_indices`: every entry is -1 or a slot of the cache; the indices are the indexer's top-k
  (-1 for no token) converted to global slots through the block table
  (`triton_convert_req_index_to_global_index`, which leaves -1 as -1), so no other negative and no
  slot past the cache reaches the kernel;
- `has_topk_length = 0`: the caller passes no topk_length (867-877), and the sm90 kernel refuses
  one (`Assertion params.topk_length == nullptr failed ... V3.2 does not support dynamic topk
  length`, raised as a RuntimeError: a clear refusal, not a defect);
- `heads one-of 64 128`: the kernel takes h_q 64 or 128 only, and the caller pads the heads to one
  of them (`_compute_fp8_decode_padded_heads`, 544-547; `_fp8_flash_mla_kernel`, 855-865);
- `topk one-of 512 1024 2048`: topk_tokens, the model's index_topk (the indexer's topk_indices_buffer
  width);
- `page = 64`, `kv_cache contiguous`, `block_stride = 41984`, `kv_offset = 0`: the fp8_ds_mla cache
  of 64-token blocks (`get_supported_kernel_block_sizes`, 100-101), 656 bytes a token, one block
  after another;
- `scales dtype fp32`: DeepSeek V3.2's format, four fp32 tile scales per token;
- `q_offset = 0`, `indices_offset = 0`: q is a fresh tensor (or the head-padded copy) and the
  indices are topk_indices_buffer[:tokens], both at the start of their storage;
- `softmax_scale >= 0.07`: the caller's scale is qk_head_dim^-0.5 = 192^-0.5 = 0.0722 times YaRN's
  mscale^2 >= 1 (model_executor/models/deepseek_v2.py 1034, 1126). (The kernel gives NaN at scale 0
  and NaN or +inf at negative scales: docs/findings.md 8.)
- `precision kv bf16`, `precision p bf16`: FlashMLA's fp8 decode dequantizes K and V to bf16 and
  takes both products on bf16 tensor cores (P cast to bf16 before P.V), fp32 accumulation;
- `batch_rows rounding`: the split-KV schedule (get_mla_metadata's tile scheduler, made on the first
  call for the batch's shape) depends on the batch, so a request launched alone may round
  differently; flashmla_sparse.py does not ask for batch-invariant bits.

Run on an H100 under these (2026-12-06, 75 s, seed 1): PARTIAL, 38 cases, every property passes
but far_slots, whose cases (16 heads) lie outside `heads one-of 64 128`. Without `clean_indices`,
`has_topk_length = 0` and the scale bound, mlacheck finds what docs/findings.md 8 lists.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_release  # noqa: E402
from vllm_release import implements  # noqa: E402

LIBRARY = "vllm/_flashmla_C.abi3.so"
INTERFACE = "vllm/third_party/flashmla/flash_mla_interface.py"

_PATH = vllm_release.compiled_library(LIBRARY, "vllm_flashmla.py", "FlashMLA's compiled CUDA kernels")

_interface = None


def flashmla():
    """The release's flash_mla_interface module, its library loaded (once per process). Its
    `import vllm._flashmla_C` (which loads the library in vLLM) meets a shim standing for the library
    loaded here."""
    global _interface
    if _interface is None:
        torch.ops.load_library(_PATH)
        package = vllm_release.shim("vllm", __path__=[])
        library = vllm_release.shim("vllm._flashmla_C")
        package._flashmla_C = library
        _interface = vllm_release.load_module(INTERFACE, shims=(package, library))
    return _interface


CONTRACT = ["clean_indices", "has_topk_length = 0", "heads one-of 64 128", "topk one-of 512 1024 2048", "page = 64",
            "kv_cache contiguous", "block_stride = 41984", "kv_offset = 0", "scales dtype fp32", "q_offset = 0",
            "indices_offset = 0", "softmax_scale >= 0.07", "precision kv bf16", "precision p bf16", "batch_rows rounding"]


@implements("sparse_mla_decode", contract=CONTRACT)
def sparse_decode(q, kv_cache, indices, topk_length, attn_sink, out, lse, softmax_scale):
    """flashmla_sparse.py 867-877: flash_mla_with_kvcache(q, k_cache=cache.view(uint8).unsqueeze(-2),
    block_table=dummy, head_dim_v=512, cache_seqlens=dummy, tile_scheduler_metadata=get_mla_metadata()[0],
    is_fp8_kvcache=True, indices=topk_indices, softmax_scale=...), with attn_sink."""
    if q.numel() == 0:
        return None
    m = flashmla()
    sched, _ = m.get_mla_metadata()
    dummy = torch.zeros((q.shape[0], 1), dtype=torch.int32, device=q.device)
    o, l = m.flash_mla_with_kvcache(
        q=q, k_cache=kv_cache.view(torch.uint8).unsqueeze(-2), block_table=dummy, head_dim_v=512,
        cache_seqlens=dummy[:, 0], tile_scheduler_metadata=sched, is_fp8_kvcache=True, indices=indices,
        softmax_scale=float(softmax_scale), topk_length=topk_length, attn_sink=attn_sink)  # topk_length: None
    out.copy_(o)
    lse.copy_(l)
    return None
