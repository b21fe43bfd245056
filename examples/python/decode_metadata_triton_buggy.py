"""The buggy twin of decode_metadata_triton.py: its Triton uniform kernel launched for a batch that
is not uniform (tokens dividing evenly among requests taken for uniform, as in
decode_metadata_torch_buggy.py). On a GPU, or on the host in Triton's interpreter.

    mlacheck check --backend cuda --python examples/python/decode_metadata_triton_buggy.py:decode_metadata  # FAIL

It mirrors U1 of docs/bugs.md (the uniform kernel taken for a batch that is not uniform; its test of
uniformity is another wrong one), so the kill matrix runs it as U1's Triton variant:

    mlacheck mutants --python examples/python/decode_metadata_triton_buggy.py:decode_metadata  # killed
"""
from decode_metadata_torch_buggy import UniformByDivision
from decode_metadata_triton import TritonBuilder


class BuggyTritonBuilder(UniformByDivision, TritonBuilder):
    pass


def decode_metadata(limits, buffers):
    return BuggyTritonBuilder(limits, buffers)


decode_metadata.mlacheck_mirrors = "U1"  # the docs/bugs.md row (what @mlacheck.implements(mirrors=) sets)
