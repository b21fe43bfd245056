"""A correct top-k that takes 3 s a call: a budget of 1 s ends inside its first case, which is
given the case timeout to end, so check judges one case of one property and must say PARTIAL,
never PASS (tests/tools/python_cli_test.cpp, tests/python/test_package.py)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
from topk_torch import topk_decode as full_topk_decode  # noqa: E402


def topk_decode(logits, next_n, seq_lens, k, out):
    time.sleep(3)
    full_topk_decode(logits, next_n, seq_lens, k, out)
