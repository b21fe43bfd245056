"""The buggy twin of topk_torch.py: its store writes one row past out (the slice-past-num-rows bug).

    mlacheck check --python examples/python/topk_torch_buggy.py:topk_decode --budget 20   # FAIL

The answer is right, but it is stored the way a hand-written kernel launch stores it: through
out's data pointer and row stride, over a grid of rows + 1 (the padded or persistent row count
instead of the view's). torch's own indexing cannot write past a view, so the store goes through
a raw pointer, as a Triton or CUDA kernel given out.data_ptr() does. When out is a slice of a
larger buffer the extra row stays inside the allocation, where no address sanitizer sees it;
mlacheck's guard reports the buffer, the view, the row and the column it hit.
"""
import ctypes

import numpy as np
import torch

from topk_torch import topk_decode as correct_topk_decode


def topk_decode(logits, next_n, seq_lens, k, out):
    rows, k_cols = out.shape
    answer = torch.empty((rows, k_cols), dtype=torch.int32)
    correct_topk_decode(logits, next_n, seq_lens, k, answer)
    if k_cols == 0:
        return
    row_stride = out.stride(0)
    launched = rows + 1  # the bug: one row too many
    span = (launched - 1) * row_stride + k_cols
    memory = np.ctypeslib.as_array(ctypes.cast(out.data_ptr(), ctypes.POINTER(ctypes.c_int32)), shape=(span,))
    for row in range(launched):
        values = answer[row] if row < rows else torch.full((k_cols,), -1, dtype=torch.int32)
        memory[row * row_stride: row * row_stride + k_cols] = values.numpy()
