"""mlacheck adapters for DeepGEMM's paged fp8 MQA logits, the indexer's decode logits of DeepSeek
V3.2: `deep_gemm.fp8_paged_mqa_logits` with the schedule `deep_gemm.get_paged_mqa_logits_metadata`
makes for it (csrc/apis/attention.hpp), as the DeepGEMM you have installed or built ships them
(`import deep_gemm`; scripts/upstream.sh builds DeepGEMM's revision 54e2261 from a checkout in a
scratch folder and puts it on PYTHONPATH). cuda backend only; nothing of DeepGEMM is copied here.

    mlacheck check --backend cuda --adapter deepgemm.fp8_paged_mqa_logits --budget 60

| callable | op | drives |
|---|---|---|
| fp8_paged_mqa_logits | paged_mqa_logits | get_paged_mqa_logits_metadata(context_lens, block_kv, get_num_sms()), then fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits=False), as vLLM 0.29.0's sparse_attn_indexer.py (603-613) and v1/attention/backends/mla/indexer.py (1041) call them through vllm/utils/deep_gemm.py for the decode step |

The layouts are mlacheck's (docs/ops.md 2.1), which follow DeepGEMM's: q fp8 [B, next_n, H, D]
with its scale folded into the weights, weights fp32 [B * next_n, H], the cache block-flat (a
block's fp8 codes of every token, then its fp32 scales; DeepGEMM takes it as a [num_blocks,
block_kv, 1, D + 4] tensor of those bytes, block stride = stride(0)), block_table int32 [B, W]
with any row stride. The adapter maps arguments only: the cache is a 4-D view of the same bytes,
the schedule is made for each call as vLLM's metadata builder makes it for each step, and since
DeepGEMM returns a fresh logits tensor (rows padded to 256 floats) instead of writing a caller's,
that result is copied into mlacheck's logits view. So mlacheck checks every value DeepGEMM
computes, and sees no write of DeepGEMM's outside its own fresh tensor (it never holds the
caller's buffer).

It declares what DeepGEMM asserts on the host for sm90 and what vLLM's caller guarantees
(sm90_fp8_mqa_logits.hpp's sm90_fp8_paged_mqa_logits and sm90_paged_mqa_logits_metadata; vLLM's
sparse_attn_indexer.py):
- `context_lens rank 1`: DeepGEMM takes [B, next_n] lengths only ("Only 2D context lens is supported
  for now", attention.hpp), and its schedule reads each request's last column alone, so a request's
  rows must rise to their last (its test makes them so, ctx2d[:, -1] = ctx). vLLM hands it
  decode_metadata.seq_lens, "(B, next_n) for native spec decode" (sparse_attn_indexer.py 578-581):
  row j of request b is max(0, L_b - next_n + j + 1), which is what mlacheck's 1-D lengths mean
  (docs/ops.md 2.1); the adapter writes them as that [B, next_n] tensor;
- `mode one-of unclean`: clean_logits with 2-D lengths is asserted against; vLLM passes False and
  masks past each row's length in its top-k;
- `next_n <= 2`, `heads one-of 32 64`, `block_size = 64`: sm90's host asserts (next_n 1 or 2,
  128 % num_heads with the kernel's instantiations, block_kv 64);
- `head_dim = 128`: index_head_dim of DeepSeek V3.2, the only head size DeepGEMM's test runs on sm90;
- `max_context_len >= 1`: vLLM passes max_model_len (sparse_attn_indexer.py 603-613);
- `kv_offset = 0`, `block_stride = 8448`: the kernel loads the cache through TMA descriptors, whose
  base and strides must be multiples of 16 bytes; vLLM's indexer cache is an allocation of its own
  whose blocks are block_size x (head_dim + 4) = 64 x 132 bytes (deepseek_v2.py's
  DeepseekV32IndexerCache.get_kv_cache_spec: head_size 132, uint8).
- `q_offset one-of 0 16 32 48`, `weights_offset one-of 0 16 32 48`: q and the weights are loaded
  through TMA descriptors too (make_tma_2d_desc in sm90_fp8_mqa_logits.hpp), whose global address
  must be 16-byte aligned; vLLM hands it tensors torch allocated (offset 0). Before these keys
  existed mlacheck placed q up to 63 bytes into its buffer, and every case was refused with
  `CUDA_ERROR_INVALID_VALUE` from cuTensorMapEncodeTiled (an H100, 2026-12-06; docs/findings.md).
- `precision qk fp22`: each score q_h . k is four fp8 wgmma instructions of K = 32 into one fp32
  accumulator register set, waited on once, with no promotion of partial sums to CUDA cores
  (deep_gemm/include/deep_gemm/impls/sm90_fp8_paged_mqa_logits.cuh, sm90_fp8_paged_mqa_logits: the
  `for k < kHeadDim / WGMMA::K` loop of WGMMA::wgmma into `accum`, then warpgroup_wait<0>); Hopper's
  fp8 tensor cores keep such sums with 13 fraction bits (fp22), as DeepSeek-V3's report (section
  3.3.2, "about 14 bits") and SageAttention2 measured. relu, the weights, the sum over heads and the
  key scale are fp32 (the same file). Without the declaration every compared case was reported at
  3x to 5x the table's tolerance (docs/findings.md 14).
"""
import torch

try:
    import deep_gemm
except ImportError as e:  # one line, before any case: what is missing
    raise ImportError("deepgemm.py: DeepGEMM is not importable here (%s): build it (scripts/upstream.sh deepgemm) "
                      "or install it, and put it on PYTHONPATH" % e) from None

try:
    from mlacheck import implements
except ImportError:  # a bare checkout run by file path: the package beside this folder
    import os
    import sys
    sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from mlacheck import implements

SM90_CONTRACT = ["context_lens rank 1", "mode one-of unclean", "next_n <= 2", "heads one-of 32 64",
                 "block_size = 64", "head_dim = 128", "max_context_len >= 1", "kv_offset = 0", "block_stride = 8448",
                 "q_offset one-of 0 16 32 48", "weights_offset one-of 0 16 32 48", "precision qk fp22"]


@implements("paged_mqa_logits", contract=SM90_CONTRACT)
def fp8_paged_mqa_logits(q, kv_blocks, weights, context_lens, block_table, logits, block_size, max_context_len,
                         clean, host_context_lens):
    """The decode step's logits: the schedule for these lengths, then the kernel; its fresh result
    copied into mlacheck's logits view [B * next_n, max_context_len]."""
    head_dim = q.shape[-1]
    next_n = q.shape[1]
    # Request b's rows j have length max(0, L_b - next_n + j + 1) (docs/ops.md 2.1, 1-D lengths),
    # which DeepGEMM takes as the [B, next_n] tensor vLLM's metadata builder makes for a decode step.
    rows = context_lens.to(torch.int32).unsqueeze(1) - next_n + 1 + torch.arange(next_n, dtype=torch.int32,
                                                                                 device=context_lens.device)
    context_lens = rows.clamp(min=0).to(torch.int32).contiguous()
    cache = kv_blocks.as_strided((kv_blocks.shape[0], int(block_size), 1, head_dim + 4),
                                 (kv_blocks.stride(0), head_dim + 4, head_dim + 4, 1), kv_blocks.storage_offset())
    schedule = deep_gemm.get_paged_mqa_logits_metadata(context_lens, int(block_size), deep_gemm.get_num_sms())
    out = deep_gemm.fp8_paged_mqa_logits(q, cache, weights, context_lens, block_table, schedule, int(max_context_len),
                                         False)
    logits.copy_(out)
    return None
