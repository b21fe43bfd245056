"""A stand-in for DeepGEMM's paged MQA logits on the CPU, for CI: what csrc/apis/attention.hpp and
tests/test_attention.py (revision 54e2261) say the two functions take and compute, written here in
torch. It lets CI check that python/mlacheck/adapters/deepgemm.py maps mlacheck's arguments onto
DeepGEMM's (the block-flat cache as [num_blocks, block_kv, 1, D + 4] bytes, 2-D lengths whose last
column schedules a request, the fresh [B * next_n, max_context_len] result) without a GPU.
$FAKE_DEEP_GEMM_BUG=scale reads the second token of each pair's scale from the first: the
injected bug DeepGEMM's run on a GPU checks, here on the host.
"""
import os

import torch


def get_num_sms():
    return 4


def get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms):
    assert context_lens.dim() == 2 and context_lens.dtype == torch.int32 and context_lens.is_contiguous()
    assert block_kv == 64 and num_sms == get_num_sms()
    return torch.zeros(num_sms + 1, 2, dtype=torch.int32)


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                         clean_logits=False):
    assert not clean_logits and context_lens.dim() == 2
    # DeepGEMM loads q, the cache, its scales and the weights through TMA descriptors
    # (make_tma_2d_desc / make_tma_3d_desc, csrc/jit_kernels/impls/runtime_utils.hpp), whose global
    # addresses must be 16-byte aligned: cuTensorMapEncodeTiled refuses any other.
    for name, t in (("q", q), ("kv_cache", kv_cache), ("weights", weights)):
        if t.data_ptr() % 16:
            raise RuntimeError("CUDA driver error: 1 (CUDA_ERROR_INVALID_VALUE, invalid argument): %s starts at an "
                               "address that is not 16-byte aligned (a TMA descriptor's global address)" % name)
    B, N, H, D = q.shape
    num_blocks, blk = kv_cache.shape[0], kv_cache.shape[1]
    assert kv_cache.shape[2:] == (1, D + 4) and kv_cache.stride(1) == D + 4 and kv_cache.stride(3) == 1
    assert weights.shape == (B * N, H) and weights.dtype == torch.float32
    block_bytes = kv_cache.as_strided((num_blocks, kv_cache.stride(0)), (kv_cache.stride(0), 1))
    out = torch.full((B * N, max_context_len), float("nan"))
    bug = os.environ.get("FAKE_DEEP_GEMM_BUG") == "scale"
    qf = q.float()
    for b in range(B):
        last = int(context_lens[b, N - 1])  # the schedule reads the last column alone
        for t in range(min(last, max_context_len)):
            block, slot = int(block_table[b, t // blk]), t % blk
            codes = block_bytes[block, slot * D:(slot + 1) * D].contiguous().view(torch.float8_e4m3fn).float()
            s = slot - 1 if bug and slot % 2 == 1 else slot
            scale = block_bytes[block, blk * D + 4 * s:blk * D + 4 * s + 4].contiguous().view(torch.float32)[0]
            for j in range(N):
                heads = (qf[b, j] @ codes).relu()
                out[b * N + j, t] = (heads * weights[b * N + j]).sum() * scale
    return out
