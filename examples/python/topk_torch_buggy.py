"""The buggy twin of topk_torch.py: its store writes one row past out (the slice-past-num-rows bug).

    mlacheck check --python examples/python/topk_torch_buggy.py:topk_decode --budget 20   # FAIL

The answer is right, but it is stored the way a hand-written kernel launch stores it: over a grid
of rows + 1 (the padded or persistent row count instead of the view's), through a view of out's
memory widened to that many rows (torch.as_strided over out's row stride), as a Triton or CUDA
kernel given out.data_ptr() would. When out is a slice of a larger buffer the extra row stays
inside the allocation, where no address sanitizer sees it; mlacheck's guard reports the buffer, the
view, the row and the column it hit. Runs on CPU and CUDA tensors alike.
"""
import torch

from topk_torch import topk_decode as correct_topk_decode


def topk_decode(logits, next_n, seq_lens, k, out):
    rows, k_cols = out.shape
    answer = torch.full((rows + 1, k_cols), -1, dtype=torch.int32, device=out.device)
    correct_topk_decode(logits, next_n, seq_lens, k, answer[:rows])
    if k_cols == 0:
        return
    launched = rows + 1  # the bug: one row too many
    torch.as_strided(out, (launched, k_cols), out.stride()).copy_(answer)
