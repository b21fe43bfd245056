"""Stand-in (tests/upstream/fake_sglang/sglang/MLACHECK_STANDIN) of SGLang 0.5.23's
`triton_sparse_mla_decode_splitk`, computing what the release's docstring says in float32:
q_nope [bs, H, d_v] and q_rope [bs, H, d_tail] (any strides), kv [num_pages, 1, d_v + d_tail],
indices [bs, 1, topk] int32 (an entry < 0 is no key); returns [1, bs, H, d_v] bf16, the softmax over
each row's keys of q . k x sm_scale times V = k[:d_v]; a row without a key gives 0.

FAKE_SGLANG_BUG=inclusive: the bug scripts/upstream_cache.sh injects in the release's fused kernel
(sglang-<version>-bug-sparse: `k_pos < valid_topk` made `<=`): each row also takes the entry one past
its end, the next row's first (past the last row, none)."""
import os

import torch


def triton_sparse_mla_decode_splitk(q_nope, q_rope, kv, indices, sm_scale, d_v=512, kv_splits=None, workspace=None):
    bs, heads, _ = q_nope.shape
    q = torch.cat([q_nope, q_rope], dim=-1).float()
    idx = indices.squeeze(1).long()
    if os.environ.get("FAKE_SGLANG_BUG") == "inclusive":
        nxt = torch.full((bs, 1), -1, dtype=idx.dtype)
        nxt[:-1, 0] = idx[1:, 0]
        idx = torch.cat([idx, nxt], dim=1)
    valid = idx >= 0
    keys = kv.reshape(kv.shape[0], -1)[idx.clamp(min=0)].float()
    keys = torch.where(valid[..., None], keys, torch.zeros((), dtype=keys.dtype))
    scores = torch.einsum("thd,tkd->thk", q, keys) * sm_scale
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    p = torch.where(valid.any(dim=-1)[:, None, None], p, torch.zeros((), dtype=p.dtype))  # no key: 0, not NaN
    out = torch.einsum("thk,tkd->thd", p, keys[..., :d_v])
    return out.to(torch.bfloat16).unsqueeze(0)
