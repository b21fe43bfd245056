"""A top-k decode callable that does nothing: benchmarks/python_call_bench.cpp times the Python
call path with it (the worker's round trip, the views lent, the tensors made), apart from any work."""


def topk_decode(logits, next_n, seq_lens, k, out):
    pass
