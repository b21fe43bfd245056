"""A top-k whose parameters do not match what mlacheck passes to topk_decode (`scores` for `logits`):
refused when the worker loads it, in one line, exit 2, before any case (tests/tools/python_cli_test.cpp)."""


def topk_decode(scores, next_n, seq_lens, k, out):
    raise AssertionError("never called: the signature is refused at load")
