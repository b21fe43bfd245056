"""A stand-in, on the CPU, of the two functions of vLLM 0.29.0's v1/attention/ops/flashmla.py that
python/mlacheck/adapters/vllm_flashmla.py's dense_decode_fp8 loads (by definition, with torch and
the availability helpers as their globals): the fp8 dense decode's metadata and call, computed in
float64 by torch (q and the cache fp8, dequantized by descale_q and descale_k). Written here;
nothing of vLLM or FlashMLA is copied.

$FAKE_FLASHMLA_BUG=descale applies descale_q where descale_k goes: the injected bug
scripts/upstream.sh --injected puts in the release's file, here on the host.
"""
import torch


def get_mla_metadata_dense_fp8(cache_seqlens, num_q_tokens_per_head_k, num_heads_k):
    assert cache_seqlens.dtype == torch.int32 and num_heads_k == 1 and num_q_tokens_per_head_k >= 1
    return torch.zeros(1, 8, dtype=torch.int32), torch.zeros(cache_seqlens.shape[0] + 1, dtype=torch.int32)


def flash_mla_with_kvcache_fp8(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata, num_splits,
                               softmax_scale=None, causal=False, descale_q=None, descale_k=None):
    import os
    assert q.dtype == torch.float8_e4m3fn and k_cache.dtype == torch.float8_e4m3fn and head_dim_v == 512
    assert descale_q.shape == (1,) and descale_k.shape == (1,) and num_splits.shape[0] == q.shape[0] + 1
    dq = float(descale_q[0])
    dk = float(descale_q[0] if os.environ.get("FAKE_FLASHMLA_BUG") == "descale" else descale_k[0])
    b, s_q, h_q, d = q.shape
    page = k_cache.shape[1]
    out = torch.zeros(b, s_q, h_q, 512, dtype=torch.bfloat16)
    lse = torch.full((b, h_q, s_q), float("-inf"), dtype=torch.float32)
    for i in range(b):
        n_keys = int(cache_seqlens[i])
        pos = torch.arange(n_keys)
        kv = k_cache[block_table[i, pos // page].long(), pos % page, 0].to(torch.float64) * dk
        scores = torch.einsum("thd,nd->thn", q[i].to(torch.float64) * dq, kv) * softmax_scale
        for t in range(s_q):
            n = max(0, n_keys - s_q + t + 1) if causal else n_keys
            if n == 0:
                continue
            s = scores[t, :, :n]
            m = s.max(-1, keepdim=True).values
            p = torch.exp(s - m)
            total = p.sum(-1, keepdim=True)
            out[i, t] = (p @ kv[:n, :512] / total).to(torch.bfloat16)
            lse[i, :, t] = (m + total.log()).squeeze(-1).to(torch.float32)
    return out, lse
