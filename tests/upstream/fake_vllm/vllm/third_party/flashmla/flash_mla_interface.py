"""A stand-in, on the CPU, of vLLM 0.29.0's third_party/flashmla/flash_mla_interface.py as far as
the dense decode goes: `get_mla_metadata` and `flash_mla_with_kvcache` take what the release's take
and return what its docstring says (out [b, s_q, h_q, head_dim_v] bf16, softmax_lse [b, h_q, s_q]
fp32), computed in float64 by torch: causal attention of token t of s_q over the keys
[0, L - s_q + t + 1) of its request, read through the block table. Written here from that
docstring; nothing of FlashMLA is copied.

$FAKE_FLASHMLA_BUG=causal makes it ignore `causal` (every token sees all L keys): the injected bug
scripts/upstream.sh --injected puts in the release's interface, here on the host.
"""
import os

import torch
import vllm._flashmla_C  # noqa: F401  (the adapter's shim, as in the release)


class FlashMLASchedMeta:
    have_initialized = False


def get_mla_metadata(*args, **kwargs):
    return FlashMLASchedMeta(), None


def dense(q, k_cache, block_table, cache_seqlens, softmax_scale, causal, descale_q=1.0, descale_k=1.0):
    b, s_q, h_q, d = q.shape
    page = k_cache.shape[1]
    assert k_cache.dim() == 4 and k_cache.shape[2] == 1 and k_cache.shape[3] == d == 576
    out = torch.zeros(b, s_q, h_q, 512, dtype=torch.bfloat16)
    lse = torch.full((b, h_q, s_q), float("-inf"), dtype=torch.float32)
    if os.environ.get("FAKE_FLASHMLA_BUG") == "causal":
        causal = False
    for i in range(b):
        n_keys = int(cache_seqlens[i])
        pos = torch.arange(n_keys)
        kv = k_cache[block_table[i, pos // page].long(), pos % page, 0].to(torch.float64) * descale_k
        qi = q[i].to(torch.float64) * descale_q
        scores = torch.einsum("thd,nd->thn", qi, kv) * softmax_scale
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


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                           num_splits=None, softmax_scale=None, causal=False, is_fp8_kvcache=False, indices=None,
                           attn_sink=None, extra_k_cache=None, extra_indices_in_kvcache=None, topk_length=None,
                           extra_topk_length=None, out=None):
    assert isinstance(tile_scheduler_metadata, FlashMLASchedMeta) and num_splits is None
    assert indices is None and not is_fp8_kvcache and head_dim_v == 512, "the stand-in has the bf16 dense branch only"
    assert q.dtype == torch.bfloat16 and k_cache.dtype == torch.bfloat16
    return dense(q, k_cache, block_table, cache_seqlens, softmax_scale, causal)
