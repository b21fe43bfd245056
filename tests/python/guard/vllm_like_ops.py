"""A torch CPU stand-in for vLLM's `_C::top_k_per_row_decode` (its schema: csrc/libtorch_stable/
torch_bindings.cpp), for the guard's case writer (python/mlacheck/adapters/guard_cases.py): the top
k of each decode row, and, like a kernel that loops one row too far, the row after the output view
written too."""
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
