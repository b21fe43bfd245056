"""Top-k per row for decode (docs/ops.md section 3) in torch, for `mlacheck check --python`.

    mlacheck check --python examples/python/topk_torch.py:topk_decode --budget 20

mlacheck calls topk_decode(logits, next_n, seq_lens, k, out) with torch tensors that are views of
its guarded buffers: logits fp32 [rows, cols] (rows may be padded, columns strided), seq_lens int32
[B] or [B, next_n], out int32 [rows, k] (possibly a slice of a larger buffer). The answer is
written into out in place; nothing else may be written.
"""
import torch


def topk_decode(logits, next_n, seq_lens, k, out):
    rows, cols = logits.shape
    device = logits.device
    r = torch.arange(rows, device=device)
    # Each row's length n: seq_lens[b, j] (2-D), or max(0, seq_lens[b] - next_n + j + 1) (1-D).
    if seq_lens.dim() == 2:
        n = seq_lens.reshape(-1).long()
    else:
        n = (seq_lens.long()[r // next_n] - next_n + r % next_n + 1).clamp(min=0)
    # Candidates are the columns below n. -inf inside them is an ordinary (lowest) candidate, so it
    # becomes the lowest finite double, and the columns past n become -inf: never taken while a row
    # has more than k candidates. fp32 to double is exact, so ties and the values are kept.
    valid = torch.arange(cols, device=device)[None, :] < n[:, None]
    keys = logits.double()
    keys = torch.where(torch.isneginf(keys), torch.full_like(keys, -1.0e308), keys)
    keys = keys.masked_fill(~valid, float("-inf"))
    answer = torch.full((rows, k), -1, dtype=torch.int32, device=device)
    if cols > 0 and k > 0:
        kk = min(k, cols)
        answer[:, :kk] = torch.topk(keys, kk, dim=1).indices.int()
    # A row with n <= k answers exactly [0, 1, ..., n - 1, -1, ..., -1].
    slot = torch.arange(k, device=device)[None, :]
    short = torch.where(slot < n[:, None], slot, torch.full_like(slot, -1)).int()
    answer = torch.where((n <= k)[:, None], short, answer)
    out.copy_(answer)
