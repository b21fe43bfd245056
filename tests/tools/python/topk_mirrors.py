"""--python callables for `mlacheck mutants` (tests/tools/python_cli_test.cpp): the torch example's
buggy twin declaring the row it mirrors, one declaring a row of another op, and one a malformed id."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
from topk_torch_buggy import topk_decode as twin  # noqa: E402


def as_r4(logits, next_n, seq_lens, k, out):
    twin(logits, next_n, seq_lens, k, out)


def as_t1(logits, next_n, seq_lens, k, out):
    twin(logits, next_n, seq_lens, k, out)


def as_lowercase(logits, next_n, seq_lens, k, out):
    twin(logits, next_n, seq_lens, k, out)


as_r4.mlacheck_mirrors = "R4"
as_t1.mlacheck_mirrors = "T1"  # a row of mla_decode_impl, not of topk_decode
as_lowercase.mlacheck_mirrors = "r4"
