"""A --python callable that crashes its interpreter on every call (a segfault, as a broken extension
does): `FAIL ... the Python worker was killed by signal 11 (Segmentation fault) during the call`, and
each child after a crash has a new worker. Like topk_counts_starts.py, a line in
$MLACHECK_TEST_STARTS (a file) each time a Python process imports it (tests/tools/python_cli_test.cpp)."""
import ctypes
import os

if os.environ.get("MLACHECK_TEST_STARTS"):
    with open(os.environ["MLACHECK_TEST_STARTS"], "a") as f:
        f.write("%d\n" % os.getpid())


def topk_decode(logits, next_n, seq_lens, k, out):
    ctypes.string_at(0)  # reads address 0
