"""Torch CPU custom ops for the guard's tests (tests/python/test_guard.py): a row copy that keeps to
its output view, its buggy twin that also writes the row after it (inside the buffer the view was
cut from, so the op's own test, which reads only the view, never sees it), and one that writes an
input its schema says it only reads."""
import torch


@torch.library.custom_op("mlacheck_test::copy_rows", mutates_args=("out",))
def copy_rows(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x)


@copy_rows.register_fake
def _(x, out):
    return None


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


_calls = [0]


@torch.library.custom_op("mlacheck_test::topk_rows", mutates_args=("out",))
def topk_rows(x: torch.Tensor, k: int, out: torch.Tensor) -> None:
    """The k largest of each row, in descending order; ties (equal values) in the order of a shuffle
    that changes from call to call, as a parallel top-k's do: the same set every time."""
    _calls[0] += 1
    g = torch.Generator().manual_seed(_calls[0])
    perm = torch.randperm(x.shape[1], generator=g)
    idx = torch.topk(x[:, perm], k, dim=1, sorted=True).indices
    out.copy_(perm[idx].to(out.dtype))


@torch.library.custom_op("mlacheck_test::sum_rows_racy", mutates_args=("out",))
def sum_rows_racy(x: torch.Tensor, out: torch.Tensor) -> None:
    """Row sums whose order of addition changes from call to call (a shared float atomic's arrival
    order): results that differ in the last bits."""
    _calls[0] += 1
    g = torch.Generator().manual_seed(_calls[0])
    perm = torch.randperm(x.shape[1], generator=g)
    acc = torch.zeros(x.shape[0], dtype=torch.float32)
    for j in perm.tolist():
        acc += x[:, j]
    out.copy_(acc)


@torch.library.custom_op("mlacheck_test::fill_some", mutates_args=("out",))
def fill_some(out: torch.Tensor) -> None:
    """Writes every element of out but the last: the last keeps whatever out held."""
    out.view(-1)[:-1] = 1.0


@torch.library.custom_op("mlacheck_test::topk_rows_flaky", mutates_args=("out",))
def topk_rows_flaky(x: torch.Tensor, k: int, out: torch.Tensor) -> None:
    """topk_rows, but every other call its last pick is the row's smallest score instead."""
    _calls[0] += 1
    idx = torch.topk(x, k, dim=1).indices
    if _calls[0] % 2 == 0:
        idx[:, -1] = torch.argmin(x, dim=1)
    out.copy_(idx.to(out.dtype))


# An op of two overloads, defined through torch.library.Library: fill(out) keeps to its view,
# fill.value(out, value) also writes the element after it.
_lib = torch.library.Library("mlacheck_test2", "DEF")
_lib.define("fill(Tensor(a!) out) -> ()")
_lib.define("fill.value(Tensor(a!) out, float value) -> ()")


def _fill(out):
    out.fill_(1.0)


def _fill_value(out, value):
    out.fill_(value)
    torch.empty(0, dtype=out.dtype).set_(out.untyped_storage(), out.storage_offset() + out.numel(), (1,), (1,)).fill_(value)


_lib.impl("fill", _fill, "CPU")
_lib.impl("fill.value", _fill_value, "CPU")
