"""A Triton top-k that never ends on a row longer than 40 columns (a loop bound read from the wrong
variable: 2^40 iterations): in the interpreter on the host it is a hang, reported as FAIL hang with
its case, though interpreted kernels are given time in proportion to their measured cost
(tests/tools/python_cli_test.cpp). Correct on shorter rows, so the cost is measured first."""
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
from topk_torch import topk_decode as full_topk_decode  # noqa: E402


@triton.jit(do_not_specialize=["n"])
def spin(out, n):
    acc = 0
    for i in range(0, n):
        acc += 1
    tl.store(out, acc)


def topk_decode(logits, next_n, seq_lens, k, out):
    full_topk_decode(logits, next_n, seq_lens, k, out)
    if logits.shape[1] > 40 and out.numel() > 0:
        spin[(1,)](out, 1 << 40)
