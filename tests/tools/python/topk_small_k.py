"""A top-k that has no kernel for k > 8, as a real one bounded by shared memory has none: it passes
with the contract "k <= 8" and fails without it (tests/python/test_package.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
from topk_torch import topk_decode as full_topk_decode  # noqa: E402


def topk_decode(logits, next_n, seq_lens, k, out):
    if k > 8:
        raise ValueError("no kernel for k=%d (shared memory holds 8)" % k)
    full_topk_decode(logits, next_n, seq_lens, k, out)
