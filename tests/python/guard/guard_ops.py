"""Torch CPU custom ops for the guard's tests (tests/python/test_guard.py): a row copy that keeps to
its output view, its buggy twin that also writes the row after it (inside the buffer the view was
cut from, so the op's own test, which reads only the view, never sees it), and one that writes an
input its schema says it only reads."""
import torch


@torch.library.custom_op("mlacheck_test::copy_rows", mutates_args=("out",))
def copy_rows(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x)


@torch.library.custom_op("mlacheck_test::copy_rows_buggy", mutates_args=("out",))
def copy_rows_buggy(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x)
    rows, cols = out.shape
    # One row past the view, through its storage: what a kernel that loops to rows + 1 does.
    past = torch.empty(0, dtype=out.dtype, device=out.device).set_(out.untyped_storage(), out.storage_offset() + rows * out.stride(0),
                                                (cols,), (out.stride(1),))
    past.fill_(7.0)


@torch.library.custom_op("mlacheck_test::scale_rows", mutates_args=("out",))
def scale_rows_writes_input(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x * 2)
    x[0, 0] = 0.0  # the schema says x is only read


@torch.library.custom_op("mlacheck_test::copy_rows_far", mutates_args=("out",))
def copy_rows_far(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x)
    # The last element of the whole storage: far past the view, where the watch keeps only checksums
    # of a large buffer.
    storage = out.untyped_storage()
    last = storage.nbytes() // out.element_size() - 1
    torch.empty(0, dtype=out.dtype, device=out.device).set_(storage, last, (1,), (1,)).fill_(3.0)
