"""mlacheck adapters for vLLM's released Triton kernels on the DeepSeek sparse-attention (DSA) and
MLA decode path, run as vLLM runs them. On the host backend the kernels run in Triton's
interpreter (TRITON_INTERPRET=1, CPU tensors), so CI without a GPU checks vLLM's real kernels:

    bash scripts/upstream_cache.sh     # once: the pinned release into ~/.cache/mlacheck/upstream
    mlacheck check --python python/mlacheck/adapters/vllm_triton.py:decode_metadata --budget 60

The release is pinned in python/upstream.lock (vLLM 0.29.0, the newest with indexer.py's
`_prepare_uniform_decode_kernel`) and loaded from the upstream cache (vllm_release.py): nothing of
vLLM is copied here.
Each adapter maps mlacheck's arguments onto the upstream function's and the upstream caller's own
buffers; nothing here computes a result. Where upstream's caller guarantees less than the op's
spec allows, the adapter's contract says so and cites the upstream line.

| callable | op | drives (vllm-0.29.0/...) |
|---|---|---|
| decode_metadata | decode_metadata, flattened | v1/attention/backends/mla/indexer.py: DeepseekV32IndexerMetadataBuilder._prepare_decode_tensors (its uniform path is the Triton kernel _prepare_uniform_decode_kernel, its general path torch) |
| decode_metadata_native | decode_metadata, native 2-D | the same method's native branch (torch) |
| mla_decode, mla_decode_bf16 | mla_decode (fp8 / bf16 cache) | v1/attention/ops/triton_decode_attention.py: decode_attention_fwd (kernels _fwd_grouped_kernel_stage1 / _fwd_kernel_stage1, _fwd_kernel_stage2), as v1/attention/backends/mla/triton_mla.py TritonMLAImpl.forward_mqa calls it |
| indexer_k_cache_insert_rocm | indexer_k_cache_insert | v1/attention/ops/rocm_aiter_mla_sparse.py: indexer_k_quant_and_cache_triton (kernel _indexer_k_quant_and_cache_kernel), as rocm_aiter_sparse_attn_indexer calls it, at block size 1 |
| cp_gather_indexer_k_quant_cache_rocm | indexer_k_cache_gather | v1/attention/ops/rocm_aiter_mla_sparse.py: cp_gather_indexer_k_quant_cache_triton (kernel _cp_gather_indexer_quant_cache_kernel), as rocm_aiter_sparse_attn_indexer calls it for a prefill chunk, at block size 1 |
| pack_decode | pack_decode (fp8 q) | v1/attention/ops/common.py: pack_seq_triton (kernel _pack_seq_kernel), as model_executor/layers/sparse_attn_indexer.py calls it for fp8 q |
| unpack_decode | unpack_decode | v1/attention/ops/common.py: unpack_seq_triton (kernel _unpack_seq_triton_kernel), as model_executor/layers/sparse_attn_indexer.py calls it |
| topk_to_global | topk_to_global | v1/attention/backends/mla/sparse_utils.py: triton_convert_req_index_to_global_index (kernel _convert_req_index_to_global_index_kernel), as FlashMLASparseImpl calls it |
| topk_to_global_rocm | topk_to_global | v1/attention/backends/mla/rocm_aiter_mla_sparse.py: triton_convert_req_index_to_global_index (ROCm's own kernel _convert_req_index_to_global_index_kernel), as ROCMAiterMLASparseImpl.forward_mqa calls it, each token's range of the ragged output one row of K |

Kernels holding bf16 values need mlacheck's model of bf16 in Triton's interpreter (the worker
installs it on the host backend: docs/python.md, "Triton on the host"). A seeded-bug copy of the release runs through
$MLACHECK_VLLM_SRC (vllm_release.py).
"""
import os
import sys
import types

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_release  # noqa: E402

from vllm_release import implements  # noqa: E402

INDEXER = "vllm/v1/attention/backends/mla/indexer.py"
TRITON_DECODE = "vllm/v1/attention/ops/triton_decode_attention.py"

# mlacheck's decode_metadata layout and path codes (include/mlacheck/plugin.h).
FLATTENED, NATIVE = 0, 1
UNIFORM, GENERAL, NATIVE_PATH = 0, 1, 2


# ---- shims: only so that a module imports without vLLM installed ------------------------------------

def triton_shims():
    """vllm.triton_utils exports the installed triton and triton.language (its HAS_TRITON branch);
    vllm.platforms.current_platform answers is_rocm() False: the CUDA configuration (tile sizes
    BLOCK 32 / BLOCK_H 16 of _decode_grouped_att_m_fwd), the one TritonMLA runs on NVIDIA GPUs."""
    platform = types.SimpleNamespace(is_rocm=lambda: False)
    return (vllm_release.shim("vllm", __path__=[]),
            vllm_release.shim("vllm.platforms", current_platform=platform),
            vllm_release.shim("vllm.triton_utils", triton=triton, tl=tl))


class CountLaunches:
    """Stands for a @triton.jit kernel in the upstream function's globals and counts its launches
    (kernel[grid](...) is passed on unchanged): which path upstream took, observed, not recomputed.
    A launch over an empty grid runs no program and is not counted (upstream launches the uniform
    kernel over 0 rows for a batch of padding requests only, min == max == 0, and then writes what
    its general path writes: nothing but the zeroed seq_lens tail)."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def run(*args, **kw):
            if all(int(g) > 0 for g in grid):
                self.launches += 1
            return launch(*args, **kw)
        return run


_INDEXER = None


def indexer():
    """indexer.py's uniform kernel and DeepseekV32IndexerMetadataBuilder._prepare_decode_tensors
    (indexer.py imports vllm.config, vllm.distributed, DeepGEMM, ...: the two definitions are
    loaded alone, vllm_release.load_functions)."""
    global _INDEXER
    if _INDEXER is None:
        fns, ns = vllm_release.load_functions(
            INDEXER, ["_prepare_uniform_decode_kernel", "DeepseekV32IndexerMetadataBuilder._prepare_decode_tensors"],
            {"torch": torch, "triton": triton, "tl": tl})
        ns["_prepare_uniform_decode_kernel"] = CountLaunches(ns["_prepare_uniform_decode_kernel"])
        _INDEXER = types.SimpleNamespace(kernel=ns["_prepare_uniform_decode_kernel"],
                                         prepare=fns["DeepseekV32IndexerMetadataBuilder._prepare_decode_tensors"])
    return _INDEXER


# ---- decode_metadata (docs/ops.md 1) --------------------------------------------------------------

class IndexerDecodeMetadata:
    """The decode part of DeepseekV32IndexerMetadataBuilder.build (indexer.py 838-1067) as mlacheck
    steps it: `self` of _prepare_decode_tensors is this object, holding the builder's persistent
    buffers of __init__ (indexer.py 575-611) as mlacheck lends them:
    decode_seq_lens_buffer = seq_lens (flattened) or context_lens (native: upstream views the same
    buffer as [B, max_decode_len]), decode_lens_buffer = decode_lens, expanded_block_table_buffer =
    block_table [max_batched_tokens, block_table_width]; offsets_buffer and arange_buffer are
    upstream's constant aranges (max_num_seqs = max_requests). Arguments as build passes them
    (indexer.py 995-1006): num_decodes = B, num_decode_tokens = the rows the consumer reads
    (num_padded_tokens, else the sum of decode_lens), decode_lens_cpu = the host decode_lens,
    max_decode_len = their max, next_n = the configured next_n. general_only maps to
    supports_varlen = True, the only switch of the uniform kernel in _prepare_decode_tensors
    besides the batch (indexer.py 689-695)."""

    def __init__(self, limits, buffers, native):
        self.limits, self.buffers, self.native = limits, buffers, native
        device = buffers.seq_lens.device
        next_n = int(limits.next_n)
        self.vllm_config = types.SimpleNamespace(speculative_config=None)
        self.supports_varlen = False
        self.decode_lens_buffer = buffers.decode_lens
        self.decode_seq_lens_buffer = buffers.seq_lens
        self.expanded_block_table_buffer = buffers.block_table
        self.offsets_buffer = torch.arange(next_n, device=device, dtype=torch.int32)
        self.arange_buffer = torch.arange(max(int(limits.max_requests) * next_n, int(limits.max_batched_tokens)),
                                          dtype=torch.int32, device=device)

    def build(self, batch):
        up = indexer()
        lens = [int(x) for x in batch.host_decode_lens]
        B, T = len(lens), sum(lens)
        native = batch.layout == NATIVE
        rows = T if native or batch.num_padded_tokens < 0 else int(batch.num_padded_tokens)
        width = batch.block_table.shape[1]
        max_decode_len = max(lens) if lens else 0
        self.supports_varlen = bool(batch.general_only)
        self.decode_seq_lens_buffer = self.buffers.context_lens if native else self.buffers.seq_lens
        if B == 0:
            # build() runs the decode part only when num_decodes > 0 (indexer.py 938): nothing is
            # written, no decode metadata exists; the views are empty.
            return types.SimpleNamespace(
                layout=batch.layout, path=NATIVE_PATH if native else GENERAL, num_decode_tokens=0, rows=0,
                next_n_live=0, seq_lens=None if native else self.buffers.seq_lens[:0],
                decode_lens=None if native else self.buffers.decode_lens[:0],
                block_table=batch.block_table if native else self.buffers.block_table[:0, :width],
                context_lens=self.buffers.context_lens[:0].view(0, 0) if native else None)
        launches = up.kernel.launches
        seq_lens, block_table, decode_lens, batch_size, _ = up.prepare(
            self,
            seq_lens=batch.seq_lens,
            block_table=batch.block_table,
            decode_lens=batch.decode_lens,
            decode_lens_cpu=torch.tensor(lens, dtype=torch.int32),
            query_start_loc=batch.query_start_loc[:B] if batch.query_start_loc is not None else None,
            num_decodes=B,
            num_decode_tokens=rows,
            use_native=native,
            next_n=int(self.limits.next_n),
            max_decode_len=max_decode_len,
        )
        if native:
            # build() (indexer.py 1035-1036): a 1-D seq_lens (next_n == 1) becomes [B, 1].
            context = seq_lens.unsqueeze(-1) if seq_lens.dim() == 1 else seq_lens
            return types.SimpleNamespace(layout=NATIVE, path=NATIVE_PATH, num_decode_tokens=T, rows=batch_size,
                                         next_n_live=max_decode_len, seq_lens=None, decode_lens=None,
                                         block_table=block_table, context_lens=context)
        uniform = up.kernel.launches > launches
        # The expanded table rows are block_table_width wide; the batch's own columns are the view
        # (upstream's two widths are equal: see the contract).
        return types.SimpleNamespace(layout=FLATTENED, path=UNIFORM if uniform else GENERAL, num_decode_tokens=T,
                                     rows=batch_size, next_n_live=max_decode_len, seq_lens=seq_lens,
                                     decode_lens=decode_lens, block_table=block_table[:, :width], context_lens=None)


# Upstream's block table and its expanded copy have one width: indexer.py 609-612 allocates
# expanded_block_table_buffer [max_num_batched_tokens, block_table_width], and the builder's
# block_table_width (v1/worker/utils.py 276-283, get_block_table_width) is the width of the block
# table tensor it is handed (v1/worker/block_table.py 322-327, the same function of the same
# arguments); _prepare_uniform_decode_kernel copies expanded_bt_stride columns of each source row
# (indexer.py 92-97), so it relies on that.
# next_n >= 2: layouts_agree builds the native layout too, and for next_n = 1 upstream hands on the
# engine's seq_lens there (indexer.py 769), not a view of the builder's buffer.
# num_padded_tokens none: upstream gives graph-padding rows decode_lens 1 (indexer.py 757) and
# zeroes only column 0 of their block-table rows (749-752); harmless (their seq_lens are 0), but
# the spec wants those rows zero, so that difference is left out to check the rest.
# Not excluded: seq_lens below decode_lens. Padding requests do come with seq_len 0 and d tokens
# (the uniform kernel's own comment, indexer.py 82-85), and the general path does not clamp
# (indexer.py 737-739): mlacheck reports ctx -1 there.
FLAT_CONTRACT = ["layout one-of flattened", "table_cols >= table_width", "next_n >= 2", "num_padded_tokens <= -1"]


@implements("decode_metadata", contract=FLAT_CONTRACT)
def decode_metadata(limits, buffers):
    """The flattened layout: the uniform path is vLLM's Triton kernel, the general path its torch."""
    return IndexerDecodeMetadata(limits, buffers, native=False)


# The native layout is taken only for uniform batches: build() splits with
# require_uniform=not (use_flattening or supports_varlen) (indexer.py 852-858), and
# split_decodes_and_prefills (v1/attention/backends/utils.py 815-823) then counts as decodes only
# requests of the first one's query length, or 0 (graph padding, whose seq_len is 0:
# v1/worker/gpu_model_runner.py 2211). "Every d_b equal, or 0 with L_b = 0" has no clause; the
# nearest is d_b = next_n for all b. next_n >= 2: for next_n = 1 upstream hands on the engine's own
# seq_lens as context_lens (indexer.py 769), not a view of the builder's buffer.
NATIVE_CONTRACT = ["layout one-of native", "decode_lens >= next_n", "next_n >= 2", "table_cols >= table_width",
                   "num_padded_tokens <= -1"]


@implements("decode_metadata", contract=NATIVE_CONTRACT)
def decode_metadata_native(limits, buffers):
    """The native 2-D layout: _prepare_decode_tensors' torch branch (indexer.py 758-786)."""
    return IndexerDecodeMetadata(limits, buffers, native=True)


# ---- mla_decode (docs/ops.md 5) -------------------------------------------------------------------

def triton_decode():
    return vllm_release.load_module(TRITON_DECODE, triton_shims())


# TritonMLAImpl.forward_mqa (triton_mla.py 263-344) is what calls decode_attention_fwd:
# - q_len 1: TritonMLAMetadataBuilder reports UNIFORM_SINGLE_TOKEN_DECODE (triton_mla.py 53-55) and
#   a causal decode row is one query token (reorder threshold 1; only the non-causal DSpark draft
#   flattens multi-token blocks, triton_mla.py 315-325), q is [B, H, 576];
# - q bf16: with an fp8 KV cache, supports_quant_query_input = False (triton_mla.py 256-259): the
#   queries stay bf16/fp16 and the kernel dequantizes K and V by k_scale on load;
# - kv fp8: with a bf16 cache the kernel never reads k_scale (`if k.dtype.is_fp8()`), so an output
#   scale other than 1 is not applied; vLLM's layer._k_scale stays 1.0 for a bf16 cache. mlacheck
#   draws k_scale among reals: mla_decode_bf16 below checks the bf16 cache under `k_scale = 1`.
# - heads >= 2: one head per KV head (H = 1) takes _fwd_kernel_stage1, whose q x k is a bf16 product
#   summed in bf16 (tl.sum): Triton's interpreter cannot sum bf16 (docs/python.md), so H = 1 is
#   checked on a GPU only (the cuda backend; drop the clause there).
# Not excluded: seq_lens 0. forward_mqa passes them (graph padding, v1/worker/gpu_model_runner.py
# 2211), and _fwd_kernel_stage2 then stores acc / e_sum = 0 / 0 = NaN (triton_decode_attention.py
# 627; vLLM issue #57017, PR #57094): mlacheck reports it.
# Its precision, as _fwd_grouped_kernel_stage1 computes (triton_decode_attention.py): P is rounded to
# V's dtype before P.V (`tl.dot(p.to(v.dtype), v)`, 438), and with an fp8 cache K and V are
# dequantized to q's dtype, bf16 (`(k.to(tl.float32) * ks).to(q.dtype)`, 393, 404, 427); q . K is a
# bf16 product with fp32 sums (394, 405). Declared, so the oracle's slack follows it (docs/ops.md 7).
MLA_CONTRACT = ["q_len = 1", "q dtype bf16", "heads >= 2", "precision p bf16"]


def _mla_decode(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale, num_splits):
    """The arguments as forward_mqa builds them: q [B, H, 576], the cache with a head dim of 1
    ([num_blocks, page, 1, 576], triton_mla.py 308-311) and its first 512 values as V, o [B, H, 512],
    lse [B, H], attn_logits [B, H, num_splits, 513] fp32 (mlacheck's lent split workspace, as
    upstream takes it from its workspace manager), sm_scale = the layer's softmax scale
    (base_scale x q_scale: the query's scale when it carries one), k_scale = v_scale = the layer's
    _k_scale tensor."""
    B, q_len, H, _ = q.shape
    kv = kv_cache.unsqueeze(2)
    kv_c = kv[..., :512]
    S = int(num_splits)
    attn_logits = workspace.reshape(-1)[: B * H * S * 513].view(B, H, S, 513)
    scale = torch.tensor(float(k_scale), dtype=torch.float32, device=q.device)
    triton_decode().decode_attention_fwd(
        q[:, 0], kv, kv_c, o[:, 0], lse[:, 0], block_table, seq_lens, attn_logits, S,
        float(base_scale) * float(q_scale), kv.size(1), k_scale=scale, v_scale=scale, is_mla=True)


@implements("mla_decode", contract=MLA_CONTRACT + ["kv_cache dtype fp8", "precision kv bf16"])
def mla_decode(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale, num_splits):
    _mla_decode(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale, num_splits)


# k_scale = 1: vLLM's _k_scale of a bf16 cache (the kernel never reads it: `if k.dtype.is_fp8()`).
@implements("mla_decode", contract=MLA_CONTRACT + ["kv_cache dtype bf16", "k_scale = 1"])
def mla_decode_bf16(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale, num_splits):
    _mla_decode(q, kv_cache, block_table, seq_lens, workspace, o, lse, base_scale, q_scale, k_scale, num_splits)


# ---- unpack_decode and topk_to_global (docs/ops.md 6, 3) -------------------------------------------

COMMON = "vllm/v1/attention/ops/common.py"
SPARSE_UTILS = "vllm/v1/attention/backends/mla/sparse_utils.py"


def common_ops():
    return vllm_release.load_module(COMMON, triton_shims())


def sparse_utils():
    return vllm_release.load_module(SPARSE_UTILS, triton_shims())


# sparse_attn_indexer (model_executor/layers/sparse_attn_indexer.py 542-563) packs the decode tokens'
# fp8 q only when some decode lengths differ (requires_padding): pack_seq_triton(q_quant[:T],
# decode_lens) with its default pad, -inf, which fp8 holds as -448 (NaN in torch's conversion). Its
# comment (546-548) is the caller's guarantee: "downstream context_lens masks stale slots", so the
# padding slots may hold anything ("padding any"). q_quant is the contiguous [T, H, D] output of the
# q quantization (the wrapper reshapes it to [T, H * D] and the kernel indexes rows of H * D).
@implements("pack_decode", contract=["dtype dtype fp8_e4m3", "padding any", "tokens contiguous"])
def pack_decode(query_start_loc, tokens, packed):
    """common.py pack_seq_triton (kernel _pack_seq_kernel) on the token rows and the decode lengths
    (torch.diff of query_start_loc, as the indexer's metadata builds decode_lens); its fresh
    [B, max d_b, ...] result is copied into the first max d_b slots of each request, the slots the
    logits kernel then reads (next_n' = max d_b)."""
    lens = torch.diff(query_start_loc)
    if lens.numel() == 0 or int(lens.max()) == 0:
        return None
    res = common_ops().pack_seq_triton(tokens, lens)
    packed[:, : res.shape[1]].copy_(res.view(packed[:, : res.shape[1]].shape))
    return None


# ---- indexer_k_cache_insert, ROCm's Triton writer (docs/ops.md 2.3) ----------------------------------

ROCM_SPARSE = "vllm/v1/attention/ops/rocm_aiter_mla_sparse.py"


def rocm_k_cache_writer():
    """rocm_aiter_mla_sparse.py's indexer_k_quant_and_cache_triton and its kernel, loaded alone (the
    module imports aiter); current_platform.fp8_dtype() is torch.float8_e4m3fn (IS_FNUZ false: the
    OCP e4m3 of the spec, what MI350 and NVIDIA GPUs store; MI300's fnuz halves the 448)."""
    platform = types.SimpleNamespace(fp8_dtype=lambda: torch.float8_e4m3fn, is_rocm=lambda: True)
    fns, _ = vllm_release.load_functions(
        ROCM_SPARSE, ["_indexer_k_quant_and_cache_kernel", "indexer_k_quant_and_cache_triton"],
        {"torch": torch, "triton": triton, "tl": tl, "current_platform": platform})
    return fns["indexer_k_quant_and_cache_triton"]


# rocm_aiter_sparse_attn_indexer (rocm_aiter_mla_sparse.py 921-928) writes each step's keys with
# indexer_k_quant_and_cache_triton(k, kv_cache, slot_mapping, quant_block_size, scale_fmt), kv_cache
# [num_blocks, block_size, head_dim + 4] u8 (the block-flat layout with no block padding: the
# wrapper views it [num_blocks, -1], values then scales, 230-235), k the indexer's contiguous
# [T, head_dim] keys (the kernel reads row t at t * head_dim, 180). Its layout is the spec's at
# block size 1 ("NORMAL", 236); from 16 up (ROCm's indexer takes [1, MultipleOf(16)],
# backends/mla/indexer.py 172) it writes a tiled layout ("SHUFFLE") its own gather kernel reads,
# another layout than 2.1's, not a defect. head_dim a power of two (tl.arange(0, head_dim)) and at
# least 4: the wrapper views the scales as float32 rows of [num_blocks, block_size * (head_dim + 4)]
# bytes (the indexer's head_dim is 128).
# Judge it on the host backend (the interpreter): its fp32 `scale = max(1e-4, amax) / 448.0` (198)
# is an IEEE division on ROCm, its platform, and in the interpreter (np.divide), but Triton lowers
# fp32 `/` to div.full.f32 on NVIDIA GPUs (at most 2 ulps off), so on the cuda backend a scale can
# come back one ulp from the spec's (docs/findings.md, 2026-12-07, twenty-ninth session): a fact of
# Triton on NVIDIA, not of this kernel on ROCm.
ROCM_K_CACHE = ["block_size = 1", "block_pad = 0", "k_row_pad = 0", "head_dim one-of 4 8 16 32 64 128"]


@implements("indexer_k_cache_insert", contract=ROCM_K_CACHE)
def indexer_k_cache_insert_rocm(k, slot_mapping, kv_cache, block_size, ue8m0):
    """rocm_aiter_mla_sparse.py indexer_k_quant_and_cache_triton (kernel
    _indexer_k_quant_and_cache_kernel) on mlacheck's cache viewed [num_blocks, block_size,
    head_dim + 4], as the ROCm indexer hands it its cache."""
    if slot_mapping.numel() == 0:
        return None
    cache = kv_cache.view(kv_cache.shape[0], int(block_size), k.shape[-1] + 4)
    rocm_k_cache_writer()(k, cache, slot_mapping, 128, "ue8m0" if ue8m0 else "fp32")
    return None


# ---- indexer_k_cache_gather, ROCm's Triton reader (docs/ops.md 2.4) ----------------------------------

def rocm_k_cache_gather():
    """rocm_aiter_mla_sparse.py's cp_gather_indexer_k_quant_cache_triton and its kernels, loaded alone;
    _ON_GFX950 false (the MI300/MI325 kernel: _cp_gather_indexer_quant_cache_kernel), fp8 as in
    rocm_k_cache_writer."""
    platform = types.SimpleNamespace(fp8_dtype=lambda: torch.float8_e4m3fn, is_rocm=lambda: True)
    fns, _ = vllm_release.load_functions(
        ROCM_SPARSE, ["_cp_gather_indexer_quant_cache_kernel", "_cp_gather_indexer_quant_cache_gfx950_kernel",
                      "cp_gather_indexer_k_quant_cache_triton"],
        {"torch": torch, "triton": triton, "tl": tl, "current_platform": platform, "_ON_GFX950": False})
    return fns["cp_gather_indexer_k_quant_cache_triton"]


# rocm_aiter_sparse_attn_indexer (rocm_aiter_mla_sparse.py 939-949) gathers each prefill chunk's keys
# with cp_gather_indexer_k_quant_cache_triton(kv_cache, k_fp8, k_scale, chunk.block_table,
# chunk.cu_seq_lens, token_to_seq=chunk.token_to_seq): k_fp8 = k_fp8_full[:chunk.total_seq_lens], so
# exactly the chunk's rows (`spare_rows = 0`), contiguous [T, head_dim] (the kernel writes row t at
# t * HEAD_DIM: `dst_row_pad = 0`), k_scale [T, 4] bytes viewed as fp32; the cache as the writer's,
# [num_blocks, block_size, head_dim + 4] viewed [num_blocks, -1] (`block_pad = 0`), whose layout is
# the spec's at block size 1 only ("NORMAL"; the tiled "SHUFFLE" from 16 up, as the writer's:
# `block_size = 1`); head_dim a power of two (tl.arange(0, HEAD_DIM)). The table is read through its
# row stride (block_table.stride(0)). token_to_seq is the request of each row, which
# indexer.py's BuildPrefillChunkMetadataKernel writes (indexer.py 311-315) and the adapter computes
# from cu_seq_lens the same way.
ROCM_K_GATHER = ["block_size = 1", "block_pad = 0", "dst_row_pad = 0", "spare_rows = 0",
                 "head_dim one-of 4 8 16 32 64 128"]


@implements("indexer_k_cache_gather", contract=ROCM_K_GATHER)
def cp_gather_indexer_k_quant_cache_rocm(kv_cache, block_table, cu_seq_lens, dst_k, dst_scale, block_size):
    """rocm_aiter_mla_sparse.py cp_gather_indexer_k_quant_cache_triton (kernel
    _cp_gather_indexer_quant_cache_kernel) on mlacheck's cache viewed [num_blocks, block_size,
    head_dim + 4], the scales [T] fp32 as the caller's [T, 4] bytes."""
    rows = dst_k.shape[0]
    if rows == 0:
        return None
    head_dim = dst_k.shape[1]
    lens = torch.diff(cu_seq_lens.to(torch.int64))
    token_to_seq = torch.repeat_interleave(torch.arange(lens.numel(), dtype=torch.int32, device=lens.device), lens)
    cache = kv_cache.view(kv_cache.shape[0], int(block_size), head_dim + 4)
    rocm_k_cache_gather()(cache, dst_k.view(torch.float8_e4m3fn), dst_scale.view(torch.uint8).view(rows, 4),
                          block_table, cu_seq_lens, token_to_seq.to(torch.int32))
    return None


# sparse_attn_indexer (model_executor/layers/sparse_attn_indexer.py 678-687) unpacks only the padded
# top-k rows, int32 [B, next_n', topk], and only when the metadata says requires_padding, i.e. some
# decode lengths differ (indexer.py 768). The packed rows are topk_indices.reshape(batch_size, -1,
# topk) of the contiguous top-k output: unpack_seq_triton indexes them as row-major [B, Lmax, D].
@implements("unpack_decode", contract=["dtype dtype int32", "packed contiguous"])
def unpack_decode(query_start_loc, tokens, packed):
    """common.py unpack_seq_triton (kernel _unpack_seq_triton_kernel) on the packed rows and the
    decode lengths (build: torch.diff of query_start_loc, indexer.py 938-946); its fresh [T, topk]
    result is copied into the token rows, as sparse_attn_indexer copies it into
    topk_indices_buffer[:T] (sparse_attn_indexer.py 685-687)."""
    lens = torch.diff(query_start_loc)
    if lens.numel() == 0:
        return None
    tokens.copy_(common_ops().unpack_seq_triton(packed, lens).view(tokens.shape))
    return None


# The decode callers (flashmla_sparse.py 644-652, flashattn_mla_sparse.py 220) pass
# NUM_TOPK_TOKENS = topk_indices.shape[1], return_valid_counts=True, BLOCK_SIZE = the page: one
# program per row when the top-k width is a power of two (sparse_utils.py _remap_tiling), else
# 128-column tiles; the wrapper asserts NUM_TOPK_TOKENS % 128 == 0 before either
# (sparse_utils.py 221-223). DeepSeek-V3.2's index_topk is 2048.
# "k one-of 128 256 ..." is accepted by mlacheck (2026-11) but not applied to the integer key k
# (a case with k = 1 still ran): one width, 128, the smallest the wrapper takes.
TOPK_WIDTHS = "k = 128"


@implements("topk_to_global", contract=[TOPK_WIDTHS])
def topk_to_global(query_start_loc, local, block_table, page, **kw):
    """sparse_utils.py triton_convert_req_index_to_global_index (kernel
    _convert_req_index_to_global_index_kernel) as FlashMLASparseImpl calls it: req_id_per_token =
    the request of each token (repeat_interleave of the query lengths, what the sparse metadata
    builder stores), the request block table, the local indices; its fresh result is copied into
    mlacheck's `global` (`global` is a Python keyword: it comes in **kw)."""
    out = kw["global"]
    lens = torch.diff(query_start_loc.long())
    req_id = torch.repeat_interleave(torch.arange(lens.numel(), dtype=torch.int32, device=lens.device), lens)
    if local.shape[0] == 0:
        return None
    res, _ = sparse_utils().triton_convert_req_index_to_global_index(
        req_id, block_table, local, BLOCK_SIZE=int(page), NUM_TOPK_TOKENS=local.shape[1], return_valid_counts=True)
    out.copy_(res)
    return None


# ---- topk_to_global, ROCm's own ragged writer (docs/ops.md 3) --------------------------------------

ROCM_SPARSE_BACKEND = "vllm/v1/attention/backends/mla/rocm_aiter_mla_sparse.py"


def rocm_global_index():
    """The ROCm backend's own triton_convert_req_index_to_global_index and its kernel, loaded alone
    (the module imports aiter)."""
    fns, _ = vllm_release.load_functions(
        ROCM_SPARSE_BACKEND, ["_convert_req_index_to_global_index_kernel", "triton_convert_req_index_to_global_index"],
        {"torch": torch, "triton": triton, "tl": tl})
    return fns["triton_convert_req_index_to_global_index"]


# ROCMAiterMLASparseImpl.forward_mqa (backends/mla/rocm_aiter_mla_sparse.py 777-785) converts
# topk_indices [T, topk_tokens] into the builder's flat paged_kv_indices through paged_kv_indptr, the
# running sum (535) of generate_sparse_seqlen_triton's per-token counts (526): min(ctx, topk_tokens)
# for a token that sees ctx keys, 0 for a request of length 0 (generate_sparse_seqlen_kernel returns
# before storing, 186-187). The kernel stores only inside each token's range [indptr[t], indptr[t+1])
# (98-102). What the caller converts is therefore only each row's first min(ctx, topk) entries, which
# the top-k per row it runs before (ops/rocm_aiter_mla_sparse.py 957-982) fills with indices in
# [0, ctx) (docs/ops.md 3: a short row's entries past its length are -1): never -1, never a column
# past the request's table, never a request of length 0. Here every token's range is one row of K
# (indptr = K * t, the output mlacheck's contiguous `global` seen flat), which changes which entries
# are converted, not how: "locals one-of in-range" and "seq_lens >= 1" are that caller's guarantee.
# Outside it the kernel stores 0 where its docstring promises -1 (docs/findings.md, vLLM 0.29.0 5).
# NUM_TOPK_TOKENS % BLOCK_N (128) == 0 is asserted (129-131): k = 128.
ROCM_TOPK_TO_GLOBAL = ["k = 128", "global contiguous", "seq_lens >= 1", "locals one-of in-range"]


@implements("topk_to_global", contract=ROCM_TOPK_TO_GLOBAL)
def topk_to_global_rocm(query_start_loc, local, block_table, page, **kw):
    """backends/mla/rocm_aiter_mla_sparse.py triton_convert_req_index_to_global_index (ROCm's kernel
    _convert_req_index_to_global_index_kernel), writing into mlacheck's `global` itself: req_id per
    token as the ROCm builder makes it (np.repeat of the query lengths, 498-500), indptr K * t."""
    out = kw["global"]
    T, K = local.shape
    if T == 0:
        return None
    lens = torch.diff(query_start_loc.long())
    req_id = torch.repeat_interleave(torch.arange(lens.numel(), dtype=torch.int32, device=lens.device), lens)
    indptr = torch.arange(T + 1, dtype=torch.int32, device=local.device) * K
    rocm_global_index()(req_id, block_table, local, indptr, out.view(-1), BLOCK_SIZE=int(page), NUM_TOPK_TOKENS=K)
    return None
