"""The buggy twin of indexer_decode_step_torch.py: the persistent top-k buffer sliced to the
launch's rows (num_padded_tokens, or B * next_n') instead of num_decode_tokens, so the rows after
this step's tokens, which belong to the batch's prefill tokens, are overwritten.

    mlacheck check --python examples/python/indexer_decode_step_torch_buggy.py:indexer_decode_step   # FAIL

mlacheck reports the write past the view of the token rows, with its row and column.
"""
from indexer_decode_step_torch import DecodeStep


class BuggyDecodeStep(DecodeStep):
    def store_topk(self, s, out, row_of_token, tokens):
        rows = min(out.shape[0], s.topk_buffer.shape[0])  # the launch's rows, not the tokens
        s.topk_buffer[:rows] = out[:rows]


def indexer_decode_step(limits, buffers):
    return BuggyDecodeStep(limits, buffers)
