"""A Triton kernel for mlacheck.guard() (docs/guard.md): copies the rows of x into out, one program
per row. copy_rows_buggy launches one program too many, so the last one writes the row after out:
inside the buffer out was sliced from, where neither the kernel's own test (which reads out) nor a
memory checker (which bounds the allocation) looks. On a GPU, or on the host under
TRITON_INTERPRET=1.

    with mlacheck.guard():
        copy_rows_buggy(x, buf[:3])     # StrayWrite: row 3, column 0 (past the view's 3 rows)
"""
import triton
import triton.language as tl


@triton.jit
def _copy_rows(x_ptr, out_ptr, cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * x_stride + c, mask=c < cols, other=0.0)
    tl.store(out_ptr + row * out_stride + c, v, mask=c < cols)


def _launch(x, out, extra):
    rows, cols = out.shape
    block = triton.next_power_of_2(max(cols, 1))
    # The buggy launch's extra program reads row `rows` of x too: x is given with a row to spare.
    _copy_rows[(rows + extra,)](x, out, cols, x.stride(0), out.stride(0), BLOCK=block)


def copy_rows(x, out):
    _launch(x, out, 0)


def copy_rows_buggy(x, out):
    _launch(x, out, 1)
