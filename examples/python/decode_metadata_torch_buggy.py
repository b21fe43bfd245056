"""The buggy twin of decode_metadata_torch.py: the uniform path for a batch that is not uniform.

    mlacheck check --python examples/python/decode_metadata_torch_buggy.py:decode_metadata   # FAIL

It calls a batch uniform when its tokens divide evenly among its requests (num_decode_tokens % B
== 0) and expands it with d = num_decode_tokens // B, as a fused kernel launched from those two
numbers would (vLLM #39458 is this class: the fast path taken on a test that mixed batches also
pass). Decode lengths [1, 3] give 4 tokens over 2 requests: rows of the wrong request.
"""
from decode_metadata_torch import Builder


class UniformByDivision:
    """The wrong decision, as a mixin over any builder: uniform when the tokens divide evenly."""

    def takes_uniform_path(self, decode_lens):
        tokens = sum(decode_lens)
        return len(decode_lens) > 0 and tokens > 0 and tokens % len(decode_lens) == 0

    def write_uniform(self, batch, d, tokens, width):
        super().write_uniform(batch, tokens // len(batch.host_decode_lens), tokens, width)


class BuggyBuilder(UniformByDivision, Builder):
    pass


def decode_metadata(limits, buffers):
    return BuggyBuilder(limits, buffers)
