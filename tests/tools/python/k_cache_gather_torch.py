"""The indexer's K-cache gather (docs/ops.md 2.4) in torch, and a twin with seeded bug G1.

indexer_k_cache_gather copies each request's cached keys, their fp8 code bytes and the 4 bytes of
their fp32 scale, from the block-flat paged cache into token rows: `mlacheck check --python
THIS_FILE:indexer_k_cache_gather` passes. Bytes are moved as uint8 throughout, so a scale that is a
NaN keeps its payload.

table_rows_at_width reads the block table as if its rows were W entries apart (the table's shape),
as vLLM 0.29.0's CUDA gather indexes it: right for a contiguous table, wrong for a view into a wider
one. It mirrors docs/bugs.md G1 and fails indexer_k_cache_gather.equals_oracle.
"""
import torch


def _rows(cu_seq_lens, block_size):
    """For every row below cu_seq_lens[B]: its request, and its token's table column and slot."""
    cu = cu_seq_lens.to("cpu", torch.int64)
    lens = cu[1:] - cu[:-1]
    total = int(cu[-1])
    request = torch.repeat_interleave(torch.arange(lens.numel()), lens)
    position = torch.arange(total) - cu[:-1][request]
    return total, request, position // block_size, position % block_size


def _copy(kv_cache, blocks, slots, dst_k, dst_scale, block_size):
    total, D = blocks.numel(), dst_k.shape[1]
    device = kv_cache.device
    rows = kv_cache[blocks.to(device)]  # [total, block_stride] uint8, one row a token's block
    slots = slots.to(device)
    codes = slots[:, None] * D + torch.arange(D, device=device)
    dst_k[:total] = torch.gather(rows, 1, codes)
    scale = block_size * D + 4 * slots[:, None] + torch.arange(4, device=device)
    dst_scale.view(torch.uint8)[:4 * total] = torch.gather(rows, 1, scale).reshape(-1)


def indexer_k_cache_gather(kv_cache, block_table, cu_seq_lens, dst_k, dst_scale, block_size):
    total, request, column, slot = _rows(cu_seq_lens, block_size)
    if total == 0:
        return None
    table = block_table.to("cpu", torch.int64)
    _copy(kv_cache, table[request, column], slot, dst_k, dst_scale, block_size)
    return None


def table_rows_at_width(kv_cache, block_table, cu_seq_lens, dst_k, dst_scale, block_size):
    total, request, column, slot = _rows(cu_seq_lens, block_size)
    if total == 0:
        return None
    B, W = block_table.shape
    # The bug: B x W entries read from the table's first, as if it were contiguous.
    flat = block_table.as_strided((B * W,), (1,)).to("cpu", torch.int64)
    _copy(kv_cache, flat[request * W + column], slot, dst_k, dst_scale, block_size)
    return None


table_rows_at_width.mlacheck_op = "indexer_k_cache_gather"
table_rows_at_width.mlacheck_mirrors = "G1"
