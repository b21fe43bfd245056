"""The indexer's decode step (docs/ops.md section 6) as an engine glues it in Python, for
`mlacheck check --python`: the metadata (decode_metadata_torch.py), q and weights packed when a
native batch is not uniform, paged logits from the fp8 cache, top-k (topk_torch.py) into padded
rows when needed, the token rows written into a slice of the persistent top-k buffer, and the
global KV slots. A stateful op: indexer_decode_step(limits, buffers) once, then run(inputs) per step.

    mlacheck check --python examples/python/indexer_decode_step_torch.py:indexer_decode_step --budget 30

The arguments are namespaces with the fields of include/mlacheck/plugin.h's
mlacheck_indexer_decode_step_limits / _buffers / _inputs; run returns what
mlacheck_indexer_decode_step_result holds, as a dict (its "global" is a Python keyword).
"""
import torch

from decode_metadata_torch import FLATTENED, Builder
from topk_torch import topk_decode


def e4m3_table():
    """The 256 fp8 e4m3fn codes as float64 (bias 7, no infinity, 0x7f / 0xff NaN)."""
    values = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 0x7
        if e == 0xF and m == 0x7:
            values.append(float("nan"))
        elif e == 0:
            values.append(sign * m / 8.0 * 2.0 ** -6)
        else:
            values.append(sign * (1.0 + m / 8.0) * 2.0 ** (e - 7))
    return torch.tensor(values, dtype=torch.float64)


class DecodeStep:
    def __init__(self, limits, buffers):
        self.limits = limits
        self.buffers = buffers
        self.metadata = Builder(limits.metadata, buffers.metadata)
        self.e4m3 = None

    def decode_fp8(self, t):
        if self.e4m3 is None or self.e4m3.device != t.device:
            self.e4m3 = e4m3_table().to(t.device)
        return self.e4m3[t.view(torch.uint8).long()]

    def logits_rows(self, s, q, weights, lengths, tables):
        """logits [rows, max_context_len] of rows with fp8 q [rows, H, D], weights [rows, H], their
        lengths and block-table rows; columns past a row's length are left -inf."""
        rows, P, bs = q.shape[0], s.max_context_len, s.block_size
        D = self.limits.head_dim
        out = torch.full((rows, P), float("-inf"), dtype=torch.float64, device=q.device)
        if rows == 0 or P == 0:
            return out
        p = torch.arange(P, device=q.device)
        live = p[None, :] < lengths[:, None]
        cols = tables.shape[1]
        block_col = (p // bs).clamp(max=max(cols - 1, 0))
        blocks = tables.long()[:, block_col] if cols > 0 else torch.zeros((rows, P), dtype=torch.long, device=q.device)
        blocks = torch.where(live, blocks, torch.zeros_like(blocks))
        slot = (p % bs)[None, :].expand(rows, P)
        cache = s.kv_blocks
        key_bytes = cache[blocks[..., None], slot[..., None] * D + torch.arange(D, device=q.device)]  # [rows, P, D]
        keys = self.decode_fp8(key_bytes)
        scale_bytes = cache[blocks[..., None], bs * D + 4 * slot[..., None] + torch.arange(4, device=q.device)]
        scales = scale_bytes.contiguous().view(torch.float32).squeeze(-1).double()  # [rows, P]
        qd = self.decode_fp8(q)  # [rows, H, D]
        dots = torch.einsum("rhd,rpd->rhp", qd, keys).clamp(min=0)
        value = scales * torch.einsum("rh,rhp->rp", weights.double(), dots)
        return torch.where(live, value, out)

    def store_topk(self, s, out, row_of_token, tokens):
        """The token rows of the launch's top-k rows into the shared buffer: exactly rows [0, tokens)."""
        s.topk_buffer[:tokens] = out[row_of_token]

    def run(self, s):
        batch = s.batch
        lens = list(batch.host_decode_lens)
        B, T, k = len(lens), sum(lens), self.limits.topk
        meta = self.metadata.build(batch)
        device = s.index_q.device
        d = batch.decode_lens.long()
        L = batch.seq_lens.long()
        b_of = torch.repeat_interleave(torch.arange(B, device=device), d)
        t_of = torch.arange(T, device=device) - batch.query_start_loc.long()[b_of]
        ctx = (L[b_of] - d[b_of] + t_of + 1).clamp(min=0)
        packed = False
        if batch.layout == FLATTENED:
            rows, next_n = meta.rows, 1
            row_of_token = torch.arange(T, device=device)
            q = torch.zeros((rows,) + tuple(s.index_q.shape[1:]), dtype=s.index_q.dtype, device=device)
            q[:T] = s.index_q[:T]
            weights = torch.zeros((rows, self.limits.heads), dtype=torch.float32, device=device)
            weights[:T] = s.index_weights[:T]
            lengths = torch.zeros(rows, dtype=torch.long, device=device)
            lengths[:T] = ctx
            tables = meta.block_table
            context_lens = meta.seq_lens
        else:
            n = meta.next_n_live
            rows, next_n = B * n, n
            row_of_token = b_of * n + t_of
            packed = rows > 0 and any(x != n for x in lens)
            slots = self.buffers.packed_q[:rows]
            q = torch.zeros_like(slots) if not packed else slots
            weights = self.buffers.packed_weights[:rows] if packed else torch.zeros(
                (rows, self.limits.heads), dtype=torch.float32, device=device)
            if packed:  # left-aligned slots, padding slots zero (weights too)
                q.view(torch.uint8).zero_()
                weights.zero_()
            q[row_of_token] = s.index_q[:T]
            weights[row_of_token] = s.index_weights[:T]
            lengths = torch.zeros(rows, dtype=torch.long, device=device)
            lengths[row_of_token] = ctx
            tables = batch.block_table[torch.arange(rows, device=device) // max(n, 1)] if rows else batch.block_table[:0]
            context_lens = meta.context_lens
        logits = self.buffers.logits[:rows, : s.max_context_len]
        logits.copy_(self.logits_rows(s, q, weights, lengths, tables).float())
        padded_topk = packed or rows != T
        out = torch.empty((rows, k), dtype=torch.int32, device=device)
        topk_decode(logits, next_n, context_lens, k, out)
        if padded_topk:
            self.buffers.padded_topk[:rows] = out
        self.store_topk(s, out, row_of_token, T)
        # Global slots: block_table[b, i // page] * page + i % page, -1 kept.
        local = s.topk_buffer[:T].long()
        table = batch.block_table.long()
        page = s.block_size
        col = (local.clamp(min=0) // page).clamp(max=max(table.shape[1] - 1, 0))
        glob = table[b_of[:, None], col] * page + local.clamp(min=0) % page if table.shape[1] else local
        s.topk_global[:T] = torch.where(local >= 0, glob, torch.full_like(local, -1)).int()
        return {"metadata": meta, "num_decode_tokens": T, "rows": rows, "next_n": next_n, "packed": int(packed),
                "padded_topk": int(padded_topk), "logits": logits, "logits_row_of_token": row_of_token,
                "topk": s.topk_buffer[:T], "global": s.topk_global[:T]}


def indexer_decode_step(limits, buffers):
    return DecodeStep(limits, buffers)
