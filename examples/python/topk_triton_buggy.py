"""The buggy twin of topk_triton.py: the mask off by one (a row's length taken as inclusive, so
column n, past the row, competes). On a GPU, or on the host in Triton's interpreter.

    mlacheck check --backend cuda --python examples/python/topk_triton_buggy.py:topk_decode   # FAIL
    mlacheck check --python examples/python/topk_triton_buggy.py:topk_decode                  # FAIL, no GPU

mlacheck reports the row, the slot and the column past the row's length that was returned. Its effect
is R4's of docs/bugs.md (a column past the row's length competes: there the general path run on
unclean logits, here the mask), so the kill matrix runs it as R4's Triton variant:

    mlacheck mutants --python examples/python/topk_triton_buggy.py:topk_decode   # killed
"""
from topk_triton import MAX_COLS, launch


def topk_decode(logits, next_n, seq_lens, k, out):
    launch(logits, next_n, seq_lens, k, out, off_by_one=True)


topk_decode.mlacheck_op = "topk_decode"
topk_decode.mlacheck_contract = "cols <= %d" % MAX_COLS
topk_decode.mlacheck_mirrors = "R4"  # the docs/bugs.md row (what @mlacheck.implements(mirrors=) sets)
