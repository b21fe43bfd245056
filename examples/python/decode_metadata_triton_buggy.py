"""The buggy twin of decode_metadata_triton.py: its Triton uniform kernel launched for a batch that
is not uniform (tokens dividing evenly among requests taken for uniform, as in
decode_metadata_torch_buggy.py). On a GPU, or on the host in Triton's interpreter.

    mlacheck check --backend cuda --python examples/python/decode_metadata_triton_buggy.py:decode_metadata  # FAIL
"""
from decode_metadata_torch_buggy import UniformByDivision
from decode_metadata_triton import TritonBuilder


class BuggyTritonBuilder(UniformByDivision, TritonBuilder):
    pass


def decode_metadata(limits, buffers):
    return BuggyTritonBuilder(limits, buffers)
