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
| dense_decode | mla_decode, bf16 cache | the same function's dense branch (torch.ops._flashmla_C.dense_decode_fwd, its tile scheduler made on the first call of a fresh `get_mla_metadata()`), as v1/attention/backends/mla/flashmla.py `FlashMLAImpl.forward_mqa` calls it for a bf16 cache (324-335) |
| dense_decode_fp8 | mla_decode, fp8 cache | v1/attention/ops/flashmla.py `get_mla_metadata_dense_fp8` and `flash_mla_with_kvcache_fp8` (torch.ops._flashmla_extension_C, vllm/_flashmla_extension_C.abi3.so), as `FlashMLAMetadataBuilder._build_decode` (170-198) and `FlashMLAImpl.forward_mqa` (309-322) call them for an fp8 cache |

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
EXTENSION = "vllm/_flashmla_extension_C.abi3.so"
INTERFACE = "vllm/third_party/flashmla/flash_mla_interface.py"
OPS = "vllm/v1/attention/ops/flashmla.py"

_PATH = vllm_release.compiled_library(LIBRARY, "vllm_flashmla.py", "FlashMLA's compiled CUDA kernels")
_EXTENSION_PATH = vllm_release.compiled_library(EXTENSION, "vllm_flashmla.py", "FlashMLA's fp8 dense decode")

_interface = None


def flashmla():
    """The release's flash_mla_interface module, its library loaded (once per process). Its
    `import vllm._flashmla_C` (which loads the library in vLLM) meets a shim standing for the library
    loaded here."""
    global _interface
    if _interface is None:
        if _PATH:  # None for a CPU stand-in of the release
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


# ---- FlashMLA's dense decode (mla_decode, docs/ops.md 5) ------------------------------------------
#
# vLLM's FLASHMLA backend (v1/attention/backends/mla/flashmla.py) on a DeepSeek model without the
# sparse indexer. What its caller guarantees, each clause with its line:
# - `page = 64`: get_supported_kernel_block_sizes returns [64] (58-59);
# - `kv_cache contiguous`: the cache is the layer's kv_c_and_k_pe_cache, [num_blocks, 64, 576] one
#   block after another, handed on as `.unsqueeze(-2)` (326, 311);
# - no clause on heads or q_len: the builder asks for uniform query lengths
#   (`query_len_support = UNIFORM`, 112) and reshapes q to [B, q_len, H, 576]
#   (`reshape_query_for_spec_decode`, 276); mlacheck's q_len 1 to 8 lies inside its reorder
#   threshold of 128 (113);
# - causal: `causal=True` (319, 332): token t of q_len sees keys [0, L - q_len + t + 1), the spec's rule;
# - the bf16 cache: q bf16 (no query quantization without an fp8 cache: model_executor/layers/
#   attention/attention.py 459-464), softmax_scale = self.scale (the layer's base scale), and no
#   descaling, so `q_scale = 1`, `k_scale = 1` (vLLM's _q_scale and _k_scale of an unquantized cache);
# - the fp8 cache: MLA layers quantize q to fp8 (`supports_quant_query_input = True`,
#   model_executor/layers/attention/mla_attention.py 3145; attention.py 459-464, 511-512) with the
#   layer's per-tensor _q_scale, and the kernel takes descale_q = _q_scale, descale_k = _k_scale
#   (320-321): `q dtype fp8`, `kv_cache dtype fp8`.
# - `q_offset = 0`, `kv_offset = 0`: q and the cache start at their storage's start, which torch
#   allocates 256-byte aligned. q is a fresh tensor (`torch.cat(q, dim=-1)` of forward_mqa, 270, or
#   the query quantization's output) and the cache is the layer's own allocation. FlashMLA loads
#   both through TMA descriptors, whose global address must be 16-byte aligned. On an H100
#   (2026-12-07) a case with q 28 bytes into its buffer gave "Error: Failed to initialize the TMA
#   descriptor 1", then the kernel ran anyway and the next CUDA call failed with "an illegal
#   instruction was encountered" (combine.cu 196). The fp8 path gave "misaligned address".
#   docs/findings.md 11.
# - seq_lens >= q_len: a decode request's seq_len counts its own query tokens
#   (model_executor/layers/attention/mla_attention.py 2446: a prefill's context is seq_lens minus
#   its query lengths; 2502: the decode rows get the same seq_lens[:num_decodes]), so each query
#   token sees at least its own key. On an H100 (2026-12-07) rows that see no key came back with lse
#   = +inf where the spec says -inf (FlashMLA's convention: vLLM's DCP merge, v1/attention/ops/
#   dcp.py 114, maps +inf to -inf), and a request of seq_len 0 crashed the kernel (an illegal memory
#   access). docs/findings.md 12. Not covered: under decode context parallelism a rank's local
#   seq_lens (mla_attention.py 2488) may be below q_len.
# FlashMLA returns lse as [B, H, q_len] (flash_mla_interface.py's docstring; forward_mqa permutes it
# for its consumer, 340-346); mlacheck's lse is [B, q_len, H], so it is copied transposed. out is
# FlashMLA's own fresh tensor (the caller passes none), copied into mlacheck's view: as for the
# sparse decode, a write past o's view is FlashMLA's tensor's, not seen here.
# FlashMLA's split-KV schedule is its own (mlacheck's num_splits and workspace are not passed).
DENSE_CONTRACT = ["page = 64", "kv_cache contiguous", "q_offset = 0", "kv_offset = 0", "seq_lens >= q_len"]


def _copy_outputs(out_t, lse_t, o, lse):
    o.copy_(out_t)
    lse.copy_(lse_t.transpose(1, 2))


# "precision p bf16": the bf16 kernel's P.V is a bf16 tensor-core product, whose register operand P
# must be bf16 (the fp8 kernel below converts P to its element type the same way; the bf16 kernel's
# source was not read). Without it a run was reported at 1.3x the table's tolerance where V cancels
# (an H100, 2026-12-07); with it, 405 cases in 402 s on an H100 passed every property judged
# (docs/findings.md 15).
@implements("mla_decode", contract=DENSE_CONTRACT + ["q dtype bf16", "kv_cache dtype bf16", "q_scale = 1",
                                                     "k_scale = 1", "precision p bf16"])
def dense_decode(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale, num_splits):
    """flashmla.py 324-335: flash_mla_with_kvcache(q, k_cache=cache.unsqueeze(-2), block_table,
    cache_seqlens=seq_lens, head_dim_v=512, tile_scheduler_metadata=get_mla_metadata(...)[0],
    softmax_scale=self.scale, causal=True, is_fp8_kvcache=False); the scheduler object is fresh for
    each step, as `_build_decode` makes it (170-175)."""
    if q.numel() == 0:
        return None
    m = flashmla()
    sched, _ = m.get_mla_metadata(seq_lens, q.shape[1] * q.shape[2], 1, is_fp8_kvcache=False)
    out_t, lse_t = m.flash_mla_with_kvcache(
        q=q, k_cache=kv_cache.unsqueeze(-2), block_table=block_table, cache_seqlens=seq_lens, head_dim_v=512,
        tile_scheduler_metadata=sched, softmax_scale=float(base_scale), causal=True, is_fp8_kvcache=False)
    _copy_outputs(out_t, lse_t, o, lse)
    return None


_fp8_fns = None


def flashmla_fp8():
    """ops/flashmla.py's get_mla_metadata_dense_fp8 and flash_mla_with_kvcache_fp8 as written, the
    extension library loaded (the module itself imports vllm.platforms and vLLM's logger)."""
    global _fp8_fns
    if _fp8_fns is None:
        if _EXTENSION_PATH:
            torch.ops.load_library(_EXTENSION_PATH)
        _fp8_fns, _ = vllm_release.load_functions(
            OPS, ["get_mla_metadata_dense_fp8", "flash_mla_with_kvcache_fp8"],
            {"torch": torch, "_is_flashmla_available": lambda: (True, None),
             "_raise_flashmla_unavailable": None})
    return _fp8_fns


# "precision p fp8": the fp8 dense kernel rounds P to e4m3 for its fp8 P.V product, with no scaling, and
# divides by the sum of the unrounded P (FlashMLA csrc/extension/sm90/dense_fp8/flash_fwd_mla_kernel.h,
# compute_attn_1rowblock_splitkv_mla: `convert_type_out(tOrP_acc, tOrP)` into the fp8 Element type;
# softmax.h sums the fp32 P; read at FlashMLA 46d64a8, vLLM's fork, whose dense_fp8 kernel files were
# last changed by its "vLLM Modifications" commit; the revision vLLM 0.29.0 pins, 0397728, is not
# public). Without it a correct run of the kernel is reported at 446x the table's tolerance
# (docs/findings.md 13). "precision qk fp22": Q.K is one fp8 wgmma GEMM over all 576 dims into fp32
# registers (flash::gemm</*zero_init=*/true>(tiled_mma, tSrQ, tSrK, tSrS) of the same function, an
# e4m3 x e4m3 -> fp32 SS wgmma), with no promotion of partial sums: Hopper's fp8 tensor cores keep
# those with 13 fraction bits (docs/ops.md 2.1). Without it lse was reported at up to 4,267x the
# table's tolerance on an H100 (docs/findings.md 13).
@implements("mla_decode", contract=DENSE_CONTRACT + ["q dtype fp8", "kv_cache dtype fp8", "precision p fp8",
                                                     "precision qk fp22"])
def dense_decode_fp8(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale,
                     num_splits):
    """flashmla.py 176-198 and 309-322: tile_scheduler_metadata, num_splits =
    get_mla_metadata_dense_fp8(seq_lens, q_len x heads, 1), then flash_mla_with_kvcache_fp8(q,
    cache.unsqueeze(-2), block_table, seq_lens, 512, those, softmax_scale=self.scale, causal=True,
    descale_q=_q_scale.reshape(1), descale_k=_k_scale.reshape(1))."""
    if q.numel() == 0:
        return None
    fns = flashmla_fp8()
    sched, splits = fns["get_mla_metadata_dense_fp8"](seq_lens, q.shape[1] * q.shape[2], 1)
    descale_q = torch.tensor([float(q_scale)], dtype=torch.float32, device=q.device)
    descale_k = torch.tensor([float(k_scale)], dtype=torch.float32, device=q.device)
    out_t, lse_t = fns["flash_mla_with_kvcache_fp8"](
        q=q, k_cache=kv_cache.unsqueeze(-2), block_table=block_table, cache_seqlens=seq_lens, head_dim_v=512,
        tile_scheduler_metadata=sched, num_splits=splits, softmax_scale=float(base_scale), causal=True,
        descale_q=descale_q, descale_k=descale_k)
    _copy_outputs(out_t, lse_t, o, lse)
    return None
