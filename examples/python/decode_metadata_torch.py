"""The decode metadata builder (docs/ops.md section 1) in torch, the way an engine writes it, for
`mlacheck check --python`. A stateful op: mlacheck calls decode_metadata(limits, buffers) once, then
build(batch) step after step, on the host (CPU tensors) or on cuda.

    mlacheck check --python examples/python/decode_metadata_torch.py:decode_metadata --budget 20

limits and buffers are namespaces with the fields of include/mlacheck/plugin.h's
mlacheck_decode_metadata_limits / _buffers: the persistent int32 buffers seq_lens and decode_lens
[max_batched_tokens], block_table [max_batched_tokens, block_table_width] and context_lens
[max_requests * next_n], lent for the builder's whole life, zeroed. A step writes only there and
returns views of them.
"""
import types

import torch

FLATTENED, NATIVE = 0, 1
UNIFORM, GENERAL, NATIVE_PATH = 0, 1, 2


class Builder:
    def __init__(self, limits, buffers):
        self.limits = limits
        self.buffers = buffers

    def takes_uniform_path(self, decode_lens):
        # The fused kernel maps row r to request r // d: right only when every request has the same
        # d and none is padding (d = 0).
        return len(decode_lens) > 0 and min(decode_lens) == max(decode_lens) > 0

    def write_rows(self, batch, b, t, tokens, width):
        """Rows [0, tokens): token t of request b gets ctx(b, t), 1 and request b's table row."""
        L, d = batch.seq_lens.long(), batch.decode_lens.long()
        seq, dec, table = self.buffers.seq_lens, self.buffers.decode_lens, self.buffers.block_table
        seq[:tokens] = (L[b] - d[b] + t + 1).clamp(min=0).int()
        dec[:tokens] = 1
        table[:tokens, :width] = batch.block_table[b]
        table[:tokens, width:].zero_()  # a wider step's columns do not survive

    def write_uniform(self, batch, d, tokens, width):
        """The fused path of a uniform batch: row r is token r % d of request r // d."""
        r = torch.arange(tokens, device=batch.seq_lens.device)
        self.write_rows(batch, r // d, r % d, tokens, width)

    def write_general(self, batch, tokens, width):
        """Any batch: request b's tokens start at query_start_loc[b]."""
        device = batch.seq_lens.device
        d = batch.decode_lens.long()
        b = torch.repeat_interleave(torch.arange(len(d), device=device), d)
        t = torch.arange(tokens, device=device) - batch.query_start_loc.long()[b]
        self.write_rows(batch, b, t, tokens, width)

    def build(self, batch):
        lens = list(batch.host_decode_lens)
        tokens = sum(lens)
        next_n_live = max(lens) if lens else 0
        width = batch.block_table.shape[1]
        L = batch.seq_lens.long()
        d = batch.decode_lens.long()
        if batch.layout == NATIVE:
            # context_lens [B, next_n'] C-contiguous, left-aligned: slot j of request b holds
            # ctx(b, j) for j < d_b and 0 for the padding slots.
            B = len(lens)
            flat = self.buffers.context_lens
            flat.zero_()
            view = flat[: B * next_n_live].view(B, next_n_live)
            j = torch.arange(next_n_live, device=flat.device)[None, :]
            ctx = (L[:, None] - d[:, None] + j + 1).clamp(min=0)
            view.copy_(torch.where(j < d[:, None], ctx, torch.zeros_like(ctx)).int())
            return types.SimpleNamespace(layout=NATIVE, path=NATIVE_PATH, num_decode_tokens=tokens, rows=B,
                                         next_n_live=next_n_live, seq_lens=None, decode_lens=None,
                                         block_table=batch.block_table, context_lens=view)
        uniform = not batch.general_only and self.takes_uniform_path(lens)
        rows = batch.num_padded_tokens if batch.num_padded_tokens >= 0 else tokens
        seq, dec, table = self.buffers.seq_lens, self.buffers.decode_lens, self.buffers.block_table
        # Rows past this step's tokens are zero: a smaller step never hands on a larger one's rows.
        seq[tokens:].zero_()
        dec[tokens:].zero_()
        table[tokens:].zero_()
        if tokens > 0:
            if uniform:
                self.write_uniform(batch, lens[0], tokens, width)
            else:
                self.write_general(batch, tokens, width)
        return types.SimpleNamespace(layout=FLATTENED, path=UNIFORM if uniform else GENERAL, num_decode_tokens=tokens,
                                     rows=rows, next_n_live=next_n_live, seq_lens=seq[:rows], decode_lens=dec[:rows],
                                     block_table=table[:rows, :width], context_lens=None)


def decode_metadata(limits, buffers):
    return Builder(limits, buffers)
