"""Calls of upstream ops that mlacheck's adapters map to its own ops, written as mlacheck case files.

When `mlacheck.guard()` saves a failing call of one of these ops (docs/guard.md, "The saved call"),
it also writes the call as a case of the mlacheck op the adapter maps it to (`<call>.case` beside
the `.call` file), so `mlacheck repro CASE --python ADAPTER`, `check` and `fuzz` can start from the
very call that failed. The mapping is the adapters' (python/mlacheck/adapters/vllm_cuda.py): an
argument for an argument, nothing computed.

| upstream op (its registration) | mlacheck op | how its arguments map |
|---|---|---|
| `_C::top_k_per_row_decode(logits, next_n, seq_lens, indices, numRows, stride0, stride1, topK)` | topk_decode | seq_lens 1-D: `lengths decode-1d` with next_n; 2-D: `decode-2d` |
| `_C::persistent_topk(logits, lengths, output, workspace, k, max_seq_len)`, `_C::cooperative_topk(...)` | topk_decode | lengths 1-D: `decode-1d`, next_n 1; 2-D: `decode-2d`, next_n its columns |
| `_C::top_k_per_row_prefill(logits, rowStarts, rowEnds, indices, numRows, stride0, stride1, topK)` | topk_prefill | `lengths prefill`, ks and ke the row starts and ends |

A call the case format cannot hold (a row of 65,536 values or more, an output that does not start
on a row of its buffer, a buffer past the format's 2^27 elements) gets no case; why is said in the
finding's message. Pure Python and torch: importing this module needs no upstream library.
"""

WRITERS = {}

# The case format's bounds (properties/topk_gen.h): 2^27 elements a buffer, rows of explicit values
# under 65,536 values each.
_MAX_ELEMENTS = 1 << 27
_MAX_ROW_VALUES = 1 << 16


def writes(*ops):
    """Registers a function (named arguments of the call) -> (case text, None) or (None, why)."""
    def register(fn):
        for op in ops:
            WRITERS[op] = fn
        return fn
    return register


def case_of(op, named):
    """(text, None) when op ("ns::name") is one the adapters map and its call fits a case file,
    (None, why) when it is mapped but does not fit, (None, None) when it is not mapped."""
    fn = WRITERS.get(op)
    if fn is None:
        return None, None
    try:
        return fn(named)
    except (KeyError, ValueError, TypeError, IndexError, RuntimeError) as e:
        return None, "its arguments do not map to a case (%s)" % (str(e).splitlines()[0] if str(e) else type(e).__name__)


def _float_word(x):
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return "%.9g" % x  # as the case format writes a float (harness/case_text.cpp float_word)


class _NoCase(Exception):
    """The call maps to an mlacheck op, but the case format cannot hold it: why."""


def _topk_layout(logits, out, k):
    """The logits and output geometry of a top-k call, as the case format's keys, or _NoCase."""
    import torch
    if logits.dtype != torch.float32 or logits.dim() != 2:
        raise _NoCase("logits are %s of rank %d, not the 2-D float32 of mlacheck's top-k" % (logits.dtype, logits.dim()))
    rows, cols = logits.shape
    s0, s1 = logits.stride()
    if s1 < 1 or s0 < cols * s1:
        raise _NoCase("the logits' strides %s are not rows of columns" % ((s0, s1),))
    if out.dim() != 2 or out.shape[0] != rows or out.shape[1] != k or out.stride(1) != 1:
        raise _NoCase("the output %s with strides %s is not rows x k, contiguous in a row" % (list(out.shape),
                                                                                            tuple(out.stride())))
    out_stride = out.stride(0)
    before, lead = divmod(out.storage_offset(), out_stride)
    if lead:
        raise _NoCase("the output starts %d elements into a row of its buffer" % lead)
    out_elements = out.untyped_storage().nbytes() // out.element_size()
    after = max(0, (out_elements - (before + rows) * out_stride) // out_stride)
    span = logits.storage_offset() + (rows - 1) * s0 + (cols - 1) * s1 + 1 if rows and cols else 0
    if span > _MAX_ELEMENTS or out_elements > _MAX_ELEMENTS:
        raise _NoCase("a buffer of more than 2^27 elements")
    return ["logits_lead %d" % logits.storage_offset(), "logits_row_pad %d" % (s0 - cols * s1),
            "logits_col_stride %d" % s1, "out_row_pad %d" % (out_stride - k), "out_rows_before %d" % before,
            "out_rows_after %d" % after]


def _topk_text(op, family, head, layout, logits, starts, n):
    """The case: head (lengths, k, rows, ...), the layout, and row r's values [starts[r], + n[r])."""
    if any(x >= _MAX_ROW_VALUES for x in n):
        raise _NoCase("a row of %d values, more than a case line holds (65,535)" % max(n))
    rows = logits.shape[0]
    text = ["# the call of %s the guard saved, as %s's case (python/mlacheck/adapters/guard_cases.py)" % (op, family),
            "property %s.rows_admissible" % family, "impl %s@ref" % family, "backend host"] + head + layout
    text.append("patterns " + " ".join(["distinct"] * rows))
    values = logits.detach().float().cpu()
    for r in range(rows):
        row = values[r, starts[r]:starts[r] + n[r]].tolist()
        text.append(("values_%d %s" % (r, " ".join(_float_word(float(v)) for v in row))).rstrip())
    text += ["seed 0x1", "warp 32", "shuffled 0"]
    return "\n".join(text) + "\n"


def _topk_decode(op, logits, lengths, next_n, k, out):
    try:
        layout = _topk_layout(logits, out, k)
        rows, cols = logits.shape
        flat = lengths.reshape(-1).tolist()
        if lengths.dim() == 1:
            kind = "decode-1d"
            n = [min(max(flat[r // next_n] - next_n + r % next_n + 1, 0), cols) for r in range(rows)]
        elif lengths.dim() == 2:
            kind, next_n = "decode-2d", lengths.shape[1]
            n = [min(max(flat[r], 0), cols) for r in range(rows)]
        else:
            raise _NoCase("lengths of rank %d" % lengths.dim())
        head = ["lengths " + kind, "k %d" % k, "next_n %d" % next_n, "rows %d" % rows, "cols %d" % cols,
                "seq_lens " + " ".join(str(int(x)) for x in flat)]
        layout.append("index_lead %d" % lengths.storage_offset())
        return _topk_text(op, "topk_decode", head, layout, logits, [0] * rows, n), None
    except _NoCase as e:
        return None, str(e)


def _topk_prefill(op, logits, ks, ke, k, out):
    try:
        layout = _topk_layout(logits, out, k)
        rows, cols = logits.shape
        if ks.dim() != 1 or ke.dim() != 1 or ks.shape[0] != rows or ke.shape[0] != rows:
            raise _NoCase("row starts %s and ends %s are not one of each a row" % (list(ks.shape), list(ke.shape)))
        starts, ends = [int(x) for x in ks.tolist()], [int(x) for x in ke.tolist()]
        if not all(0 <= a <= b <= cols for a, b in zip(starts, ends)):
            raise _NoCase("a row's [start, end) lies outside [0, %d] (the case format holds 0 <= ks <= ke <= cols)" % cols)
        head = ["lengths prefill", "k %d" % k, "next_n 1", "rows %d" % rows, "cols %d" % cols,
                "ks " + " ".join(map(str, starts)), "ke " + " ".join(map(str, ends))]
        # The format has one lead for both index tensors: ks's, which only places them in memory.
        layout.append("index_lead %d" % ks.storage_offset())
        return _topk_text(op, "topk_prefill", head, layout, logits, starts,
                          [b - a for a, b in zip(starts, ends)]), None
    except _NoCase as e:
        return None, str(e)


@writes("_C::top_k_per_row_prefill")
def _top_k_per_row_prefill(a):
    return _topk_prefill("_C::top_k_per_row_prefill", a["logits"], a["rowStarts"], a["rowEnds"], int(a["topK"]),
                         a["indices"])


@writes("_C::top_k_per_row_decode")
def _top_k_per_row_decode(a):
    return _topk_decode("_C::top_k_per_row_decode", a["logits"], a["seq_lens"], int(a["next_n"]), int(a["topK"]),
                        a["indices"])


@writes("_C::persistent_topk", "_C::cooperative_topk")
def _radix_topk(a):
    return _topk_decode("_C::persistent_topk / cooperative_topk", a["logits"], a["lengths"], 1, int(a["k"]),
                        a["output"])
