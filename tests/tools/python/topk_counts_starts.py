"""The torch top-k, and a line in $MLACHECK_TEST_STARTS (a file) each time a Python process imports
this module: how many workers a run started (tests/tools/python_cli_test.cpp)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
from topk_torch import topk_decode  # noqa: E402,F401

if os.environ.get("MLACHECK_TEST_STARTS"):
    with open(os.environ["MLACHECK_TEST_STARTS"], "a") as f:
        f.write("%d\n" % os.getpid())
