"""Top-k per row for decode (docs/ops.md section 3) as a Triton kernel, for `mlacheck check
--python` on the cuda backend, or on the host in Triton's interpreter. One program per row sorts
the row's keys in registers, so a row holds at most 8192 columns: the contract says so, and
mlacheck draws no wider case.

    mlacheck check --backend cuda --python examples/python/topk_triton.py:topk_decode --budget 30
    mlacheck check --python examples/python/topk_triton.py:topk_decode --budget 30   # no GPU

Each key packs the logit's order (its fp32 bits made monotone; NaN highest, as torch.topk ranks
it) above the column, so one descending sort ranks values and breaks ties by the lower column.
Columns at or past the row's length n get the lowest key of all, below -inf, which stays an
ordinary candidate. A row with n <= k answers [0, 1, ..., n - 1, -1, ..., -1].
"""
import torch
import triton
import triton.language as tl

MAX_COLS = 8192


# Strides and sizes are not specialized on: one compiled kernel per (BLOCK, KBLOCK), not per case.
@triton.jit(do_not_specialize=["row_stride", "col_stride", "out_row_stride", "out_col_stride", "cols", "k"])
def topk_row_kernel(logits, row_stride, col_stride, lengths, out, out_row_stride, out_col_stride, cols, k,
                    BLOCK: tl.constexpr, KBLOCK: tl.constexpr, OFF_BY_ONE: tl.constexpr):
    row = tl.program_id(0)
    n = tl.minimum(tl.load(lengths + row), cols)
    out_row = out + row.to(tl.int64) * out_row_stride
    if n <= k:
        for j0 in range(0, k, KBLOCK):
            j = j0 + tl.arange(0, KBLOCK)
            tl.store(out_row + j * out_col_stride, tl.where(j < n, j, -1), mask=j < k)
    else:
        c = tl.arange(0, BLOCK)
        if OFF_BY_ONE:
            valid = (c <= n) & (c < cols)  # the seeded bug: the row's length taken as inclusive
        else:
            valid = c < n
        x = tl.load(logits + row.to(tl.int64) * row_stride + c * col_stride, mask=valid, other=0.0)
        bits = x.to(tl.int32, bitcast=True)
        key = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # signed order of the keys = the floats' order
        key = tl.where(x != x, 0x7FFFFFFF, key)  # NaN ranks highest
        key = tl.where(valid, key, -2147483648)  # past the row: below -inf
        packed = (key.to(tl.int64) << 32) | (BLOCK - 1 - c).to(tl.int64)
        ranked = tl.sort(packed, descending=True)
        col = (BLOCK - 1 - (ranked & 0xFFFFFFFF)).to(tl.int32)
        tl.store(out_row + c * out_col_stride, col, mask=c < k)


def row_lengths(next_n, seq_lens, rows):
    """n of each row: seq_lens[b, j] (2-D), or max(0, seq_lens[b] - next_n + j + 1) (1-D)."""
    if seq_lens.dim() == 2:
        return seq_lens.reshape(-1).to(torch.int32).contiguous()
    r = torch.arange(rows, device=seq_lens.device)
    return (seq_lens.long()[r // next_n] - next_n + r % next_n + 1).clamp(min=0).to(torch.int32)


def launch(logits, next_n, seq_lens, k, out, off_by_one):
    rows, cols = logits.shape
    if rows == 0 or k == 0:
        return
    block = triton.next_power_of_2(max(cols, 16))
    topk_row_kernel[(rows,)](logits, logits.stride(0), logits.stride(1), row_lengths(next_n, seq_lens, rows), out,
                             out.stride(0), out.stride(1), cols, k, BLOCK=block,
                             KBLOCK=min(1024, triton.next_power_of_2(k)), OFF_BY_ONE=off_by_one,
                             num_warps=8 if block >= 4096 else 4)


def topk_decode(logits, next_n, seq_lens, k, out):
    launch(logits, next_n, seq_lens, k, out, off_by_one=False)


# What this kernel accepts, narrower than the spec: its rows are sorted in registers.
topk_decode.mlacheck_op = "topk_decode"
topk_decode.mlacheck_contract = "cols <= %d" % MAX_COLS
