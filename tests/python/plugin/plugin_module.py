"""A user's test module for `pytest -p mlacheck` (tests/python/test_package.py runs pytest on it; not named test_*, so a plain run of tests/python skips it):
the torch example and its buggy twin, each marked with @mlacheck.property."""
import os
import sys

import mlacheck

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
import topk_torch  # noqa: E402
import topk_torch_buggy  # noqa: E402

good = mlacheck.property("topk_decode", budget=20, fuzz=False)(topk_torch.topk_decode)  # each property's cases, then it ends
buggy = mlacheck.property("topk_decode", budget=60)(topk_torch_buggy.topk_decode)
