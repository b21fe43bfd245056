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
| persistent_topk | topk_decode | torch.ops._C.persistent_topk, as sparse_attn_indexer.py calls it for index_topk 512, 1024 and 2048 (643-656) |
| indexer_decode_topk | topk_decode | the decode step's top-k as sparse_attn_indexer.py picks it (616-666): torch.ops._C.cooperative_topk where its condition holds (at most 64 rows, a row stride that is a multiple of 4, sm90 or newer but not sm120), else persistent_topk |
| indexer_k_quant_and_cache | indexer_k_cache_insert | torch.ops._C_cache_ops.indexer_k_quant_and_cache (csrc/libtorch_stable/cache_kernels.cu), as sparse_attn_indexer.py calls it (400-406) |
| cp_gather_indexer_k_quant_cache | indexer_k_cache_gather | torch.ops._C_cache_ops.cp_gather_indexer_k_quant_cache (csrc/libtorch_stable/cache_kernels.cu), as sparse_attn_indexer.py calls it for each prefill chunk (453-462) |

Each maps mlacheck's arguments onto the op's (numRows = the logits' rows, its strides, topK = k) and
computes nothing. Each declares what sparse_attn_indexer.py guarantees it (docs/findings.md 6, 7):
- `out contiguous`: the ops take no output stride; the caller hands them `topk_indices_buffer[:rows,
  :topk_tokens]`, rows of exactly k;
- `finite`: the logits come from the indexer's fp8 MQA kernel, finite (no NaN rows);
- `ties any`: the ops promise no order among equal logits, nor the same choice launch to launch;
- `seq_lens >= next_n` (top_k_per_row_decode): every token sees at least itself, so no row is empty;
- `logits padded-rows` (top_k_per_row_decode): the logits are fp8_paged_mqa_logits' output
  (sparse_attn_indexer.py 597-612), rows of max_model_len contiguous columns. The op takes a column
  stride, but from 200,000 columns a piece of a row with at most k keys reads its logits at stride 1
  (docs/findings.md 16, corpus regression V9): latent for this caller, outside the contract;
- `k <= 2048` (top_k_per_row_*): topk_tokens is the model's index_topk (2048 in DeepSeek V3.2's
  config). The kernels take k x 4 bytes of dynamic shared memory (x 2 on the split path) and never
  check their launch: on an H100 k 6,144 runs and 8,192 does not (4,096 on the split path); the op
  returns, `out` keeps what it held, and `invalid argument` surfaces at the program's next CUDA call.
The two radix top-k kernels DeepSeek V3.2 runs (index_topk 2048) take one length per row and no
next_n. The caller hands them `decode_metadata.seq_lens`, "always 2D: (B, next_n) for native spec
decode, (B, 1) otherwise" (sparse_attn_indexer.py 583-585), lengths the metadata builder clamps at
0 (its padding slots hold 0: docs/ops.md 1, native 2-D); and the logits DeepGEMM's
`fp8_fp4_paged_mqa_logits` returns with `clean_logits=False`: a fresh slice [rows, max_model_len]
of rows aligned to 256 floats, garbage past each row's length. So they declare `k one-of 512 1024
2048`, `seq_lens rank 2`, `seq_lens >= 0` (rows of length 0 stay in their cases), `logits
padded-rows` (a row stride is passed, no column stride), `logits_lead = 0` (a fresh allocation: the
kernels load float4 from any row whose stride is a multiple of 4, and a misaligned start is
`misaligned address`), `cols >= 1` (max_model_len; with no column persistent_topk divides by zero
on the host, SIGFPE), and `short_rows any-order` (every consumer of the indices, the sparse MLA
kernels, reads a row as a set and skips -1 wherever it stands). Their 1 MiB workspace
(RADIX_TOPK_WORKSPACE_SIZE) is the caller's, reused from call to call (the workspace manager's), so
it is kept here across calls too.

indexer_k_quant_and_cache writes the indexer's fp8 K cache in the block-flat layout mlacheck's
`indexer_k_cache_insert` checks (docs/ops.md 2.3): block b's codes of every slot, then its fp32
scales. It is called with quant_block_size = head_dim (one scale per token: the indexer's
quant_block_size 128 equals index_head_dim 128, models/deepseek_v32/attention.py 88), the cache as a
[num_blocks, block_size, head_dim + 4] view of the same bytes (the kernel takes size(1) as the block
size and stride(0) as the block stride), and the slot mapping as int64, which vLLM's slot mappings
are. It declares what its callers guarantee:
- `head_dim = 128`: index_head_dim of DeepSeek V3.2's config; the kernel reduces a token's amax
  over one warp of 32 lanes x 4 values, so 128 is the quantization block it is written for;
- `k_row_pad = 0`: the kernel reads token i at i * head_dim, not through k's row stride, and its
  callers hand it a contiguous k: `torch.cat([k_pe, k_nope], dim=-1)` in deepseek_v2.py's
  Indexer.forward (800, 826), `torch.empty_like` of the projection's slice in
  models/deepseek_v32/attention.py (315), then `k[:num_tokens]` (sparse_attn_indexer.py 389).

Run on an H100 under these (2026-12-06, docs/findings.md): top_k_per_row_decode FAILs only on
finding 6's split path (corpus regression V5); top_k_per_row_prefill is PARTIAL (every property
passes, far_rows unjudged: docs/python.md); persistent_topk and indexer_decode_topk FAIL on rows of
logits that agree in fp16 (finding 7, regressions V6 and V7) and pass everything else. Again on
2026-12-07 (seed 2, 199 s each): the same, and top_k_per_row_decode failed on a column stride of 6
at 412,704 columns (finding 16, regression V9), now outside its contract (`logits padded-rows`).
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
_PATH = vllm_release.compiled_library(LIBRARY, "vllm_cuda.py", "vLLM's compiled CUDA kernels")


def vllm_ops():
    """torch.ops._C with the release's library loaded (once per process)."""
    global _loaded
    if not _loaded:
        torch.ops.load_library(_PATH)
        _loaded = True
    return torch.ops._C


DECODE_CONTRACT = ["k <= 2048", "out contiguous", "finite", "seq_lens >= next_n", "ties any", "logits padded-rows"]
PREFILL_CONTRACT = ["k <= 2048", "out contiguous", "finite", "ties any"]
RADIX_CONTRACT = ["k one-of 512 1024 2048", "cols >= 1", "seq_lens rank 2", "seq_lens >= 0", "logits padded-rows",
                  "logits_lead = 0",
                  "out contiguous", "finite", "ties any", "short_rows any-order"]
RADIX_TOPK_WORKSPACE_SIZE = 1024 * 1024  # sparse_attn_indexer.py 42
_workspaces = {}


def _workspace(device):
    """The caller's workspace: one per device, reused from call to call as the workspace manager's."""
    w = _workspaces.get(device)
    if w is None:
        w = _workspaces[device] = torch.empty(RADIX_TOPK_WORKSPACE_SIZE, dtype=torch.uint8, device=device)
    return w


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


@implements("topk_decode", contract=RADIX_CONTRACT)
def persistent_topk(logits, next_n, seq_lens, k, out):
    """sparse_attn_indexer.py 648-655: (logits, seq_lens, topk_indices, workspace, topk_tokens,
    logits.shape[1])."""
    if logits.shape[0] == 0:
        return None
    vllm_ops().persistent_topk(logits, seq_lens, out, _workspace(logits.device), int(k), logits.shape[1])
    return None


def _cooperative(logits):
    """sparse_attn_indexer.py 617-624, on a CUDA device: use_cooperative_topk (topk_tokens is one of
    512, 1024, 2048 by the contract)."""
    major, minor = torch.cuda.get_device_capability(logits.device)
    return logits.shape[0] <= 64 and logits.stride(0) % 4 == 0 and (major, minor) >= (9, 0) and major != 12


@implements("topk_decode", contract=RADIX_CONTRACT)
def indexer_decode_topk(logits, next_n, seq_lens, k, out):
    """sparse_attn_indexer.py 630-656: cooperative_topk(logits, seq_lens, topk_indices, workspace,
    topk_tokens, attn_metadata.max_seq_len) where use_cooperative_topk, else persistent_topk. The
    metadata's max_seq_len is the longest request of the step; a decode row's length is at most its
    request's, so the longest row stands for it."""
    if logits.shape[0] == 0:
        return None
    if _cooperative(logits):
        vllm_ops().cooperative_topk(logits, seq_lens, out, _workspace(logits.device), int(k),
                                    int(seq_lens.max().item()))
    else:
        vllm_ops().persistent_topk(logits, seq_lens, out, _workspace(logits.device), int(k), logits.shape[1])
    return None


INSERT_CONTRACT = ["head_dim = 128", "k_row_pad = 0"]


@implements("indexer_k_cache_insert", contract=INSERT_CONTRACT)
def indexer_k_quant_and_cache(k, slot_mapping, kv_cache, block_size, ue8m0):
    """sparse_attn_indexer.py 400-406: (k, kv_cache, slot_mapping, quant_block_size, scale_fmt); the
    cache as vLLM allocates it, [num_blocks, block_size, head_dim + 4] bytes, here a view of mlacheck's
    [num_blocks, block_stride] (the same first byte and block stride)."""
    head_dim = k.shape[1]
    cache = kv_cache.as_strided((kv_cache.shape[0], int(block_size), head_dim + 4),
                                (kv_cache.stride(0), head_dim + 4, 1), kv_cache.storage_offset())
    vllm_ops()  # loads the library, which registers _C_cache_ops too
    torch.ops._C_cache_ops.indexer_k_quant_and_cache(k, cache, slot_mapping.to(torch.int64), head_dim,
                                                     "ue8m0" if ue8m0 else "fp32")
    return None


# sparse_attn_indexer.py's prefill (440-462) gathers each chunk's keys with
# cp_gather_indexer_k_quant_cache(kv_cache, k_quant, k_scale, chunk.block_table, chunk.local_cu_seq_lens)
# into the workspace: k_quant = k_quant_full[:chunk.max_local_total_seq_lens] fp8 [T, head_dim] and
# k_scale [T, 4] bytes (_gather_workspace_shapes, 254-272), contiguous; T may be more than the
# chunk's rows under decode context parallelism (max_local_total_seq_lens, indexer.py 1106-1121), so
# rows past cu_seq_lens[B] stay in the cases (the kernel: "num_tokens may be an allocation upper
# bound"). What its callers guarantee and the kernel needs:
# - `block_size = 64`, `head_dim one-of 32 64 128`: the CUDA indexer's only block size and its head
#   sizes (backends/mla/indexer.py 171-177); the kernel copies 16-byte vectors (float4) of the cache,
#   so a block stride or head size that is not a multiple of 16 bytes is outside what it is built for;
# - `block_pad = 0`: the cache is [num_blocks, block_size, head_dim + 4] bytes with nothing between
#   blocks (deepseek_v2.py's DeepseekV32IndexerCache); `cache_lead one-of 0 4` (4-byte words before
#   block 0): the kernel's 16-byte vector loads need a 16-byte aligned cache, and the caller's is an
#   allocation of its own (on an H100, cache_lead 3 is `misaligned address` on the first case);
# - `table_row_pad = 0`: the kernel reads request b's blocks at block_table[b * size(1) + ...], the
#   table's width, not its row stride (docs/bugs.md G1's class); chunk.block_table is
#   block_table[start_idx:end_idx] (indexer.py 1174), whole rows of the builder's contiguous table;
# - `dst_row_pad = 0`: the scale of row t is stored at (t * dst_k.stride(0)) / head_dim floats, right
#   only for contiguous rows, which the workspace slice is.
GATHER_CONTRACT = ["block_size = 64", "head_dim one-of 32 64 128", "block_pad = 0", "cache_lead one-of 0 4",
                   "table_row_pad = 0", "dst_row_pad = 0"]


@implements("indexer_k_cache_gather", contract=GATHER_CONTRACT)
def cp_gather_indexer_k_quant_cache(kv_cache, block_table, cu_seq_lens, dst_k, dst_scale, block_size):
    """sparse_attn_indexer.py 456-462: (kv_cache, dst_k, dst_scale, block_table, cu_seq_lens), the cache
    as vLLM allocates it, [num_blocks, block_size, head_dim + 4] bytes (a view of mlacheck's
    [num_blocks, block_stride]), dst_k as fp8 and the scales as the workspace's [T, 4] bytes."""
    if int(cu_seq_lens[-1]) == 0:  # the caller gathers only when the chunk has keys (sparse_attn_indexer.py 455)
        return None
    rows, head_dim = dst_k.shape
    cache = kv_cache.as_strided((kv_cache.shape[0], int(block_size), head_dim + 4),
                                (kv_cache.stride(0), head_dim + 4, 1), kv_cache.storage_offset())
    vllm_ops()  # loads the library, which registers _C_cache_ops too
    torch.ops._C_cache_ops.cp_gather_indexer_k_quant_cache(cache, dst_k.view(torch.float8_e4m3fn),
                                                           dst_scale.view(torch.uint8).view(rows, 4),
                                                           block_table, cu_seq_lens)
    return None
