"""A user's own test file, as it would be written without mlacheck: a preallocated output buffer,
the op given a slice of it, assertions on the slice only. Run by tests/python/test_guard.py with and
without `pytest -p mlacheck --mlacheck-guard`."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guard_ops  # noqa: E402,F401


@pytest.mark.parametrize("rows", [1, 3])
def test_copy_rows(rows):
    buf = torch.zeros(8, 4)
    x = torch.randn(rows, 4)
    torch.ops.mlacheck_test.copy_rows(x, buf[:rows])
    assert torch.equal(buf[:rows], x)


@pytest.mark.parametrize("rows", [1, 3])
def test_copy_rows_buggy(rows):
    buf = torch.zeros(8, 4)
    x = torch.randn(rows, 4)
    torch.ops.mlacheck_test.copy_rows_buggy(x, buf[:rows])
    assert torch.equal(buf[:rows], x)  # the view is right; the row after it is not its business


@pytest.mark.no_mlacheck_guard
def test_copy_rows_buggy_opted_out():
    buf = torch.zeros(8, 4)
    x = torch.randn(2, 4)
    torch.ops.mlacheck_test.copy_rows_buggy(x, buf[:2])
    assert torch.equal(buf[:2], x)
