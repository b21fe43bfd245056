"""A decode metadata builder whose factory's parameters do not match what mlacheck passes
(`buffer` for `buffers`): refused when the worker loads it, in one line, exit 2, before any case
(tests/tools/python_cli_test.cpp)."""


def decode_metadata(limits, buffer):
    raise AssertionError("never called: the signature is refused at load")
