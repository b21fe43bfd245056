"""A --python callable named after no op (tests/tools/python_cli_test.cpp): one line saying how to
name its op (OP=..., @mlacheck.implements, or the op's own name)."""


def my_kernel(logits, next_n, seq_lens, k, out):
    pass
