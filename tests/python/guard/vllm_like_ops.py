"""Torch CPU stand-ins for vLLM's `_C::top_k_per_row_decode` and `_C::top_k_per_row_prefill` (their
schemas: csrc/libtorch_stable/torch_bindings.cpp), for the guard's case writer
(python/mlacheck/adapters/guard_cases.py): the top k of each row, and, like a kernel that loops one
row too far, the row after the output view written too."""
import torch


@torch.library.custom_op("_C::top_k_per_row_decode", mutates_args=("indices",))
def top_k_per_row_decode(logits: torch.Tensor, next_n: int, seq_lens: torch.Tensor, indices: torch.Tensor,
                         numRows: int, stride0: int, stride1: int, topK: int) -> None:
    for r in range(numRows):
        n = max(0, min(int(seq_lens.reshape(-1)[r // next_n]) - next_n + r % next_n + 1, logits.shape[1]))
        row = torch.full((topK,), -1, dtype=torch.int32)
        take = min(n, topK)
        row[:take] = torch.topk(logits[r, :n], take).indices.to(torch.int32)
        indices[r].copy_(row)
    past = torch.empty(0, dtype=indices.dtype).set_(indices.untyped_storage(),
                                                    indices.storage_offset() + numRows * indices.stride(0),
                                                    (topK,), (1,))
    past.fill_(5)


@torch.library.custom_op("_C::top_k_per_row_prefill", mutates_args=("indices",))
def top_k_per_row_prefill(logits: torch.Tensor, rowStarts: torch.Tensor, rowEnds: torch.Tensor, indices: torch.Tensor,
                          numRows: int, stride0: int, stride1: int, topK: int) -> None:
    """vLLM's prefill top-k's schema: row r's top k among columns [rowStarts[r], rowEnds[r]), as
    indices from the row's start; and, as above, the row after the output view written too."""
    for r in range(numRows):
        a, b = int(rowStarts[r]), int(rowEnds[r])
        row = torch.full((topK,), -1, dtype=torch.int32)
        take = min(b - a, topK)
        row[:take] = torch.topk(logits[r, a:b], take).indices.to(torch.int32) + a
        indices[r].copy_(row)
    torch.empty(0, dtype=indices.dtype).set_(indices.untyped_storage(),
                                             indices.storage_offset() + numRows * indices.stride(0),
                                             (topK,), (1,)).fill_(5)
