"""A --python callable that raises (tests/tools/python_cli_test.cpp): a FAIL naming the exception."""


def topk_decode(logits, next_n, seq_lens, k, out):
    raise ValueError(f"no kernel for k={k}\nsecond line of the message")
