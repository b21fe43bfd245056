"""A top-k that never returns: check must say FAIL hang under every budget, never PASS or NO RUN
(tests/tools/python_cli_test.cpp)."""
import time


def topk_decode(logits, next_n, seq_lens, k, out):
    while True:
        time.sleep(0.5)
