"""A user's test file on a GPU, for the guard's red-zone allocator (tests/python/test_guard.py runs it
with and without `--mlacheck-guard-alloc`): its outputs are whole tensors, as most kernel tests'
are, so a kernel that writes one row past its output writes past the tensor's end, into bytes
torch's caching allocator gives the next tensor or keeps free, where the guard's storage watch has
nothing to compare; and a captured graph that writes a tensor freed after its capture. The tests'
own assertions read only the outputs, so every test passes without the allocator."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
import copy_rows_triton  # noqa: E402


def test_copy_rows_into_a_whole_tensor():
    x = torch.arange(16, dtype=torch.float32, device="cuda").reshape(4, 4)
    out = torch.empty(3, 4, device="cuda")
    copy_rows_triton.copy_rows(x, out)
    assert torch.equal(out, x[:3])


def test_copy_rows_buggy_into_a_whole_tensor():
    x = torch.arange(16, dtype=torch.float32, device="cuda").reshape(4, 4)
    out = torch.empty(3, 4, device="cuda")
    copy_rows_triton.copy_rows_buggy(x, out)  # its fourth program writes row 3: past out's end
    assert torch.equal(out, x[:3])


def test_a_graph_replayed_after_its_output_was_freed():
    x = torch.arange(16, dtype=torch.float32, device="cuda").reshape(4, 4)
    out = torch.empty(3, 4, device="cuda")
    copy_rows_triton.copy_rows(x, out)  # compiled before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        copy_rows_triton.copy_rows(x, out)
    del out  # freed while the graph lives: the graph still writes its bytes
    graph.replay()
    torch.cuda.synchronize()
    assert graph is not None
