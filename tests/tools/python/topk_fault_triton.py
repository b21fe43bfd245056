"""A --python callable whose Triton kernel stores through a wild pointer (an illegal address on the
GPU, which loses the CUDA context): `FAIL crashed (cudaErrorIllegalAddress)` with the case saved;
on the host, in the interpreter, the worker's segfault: `FAIL crashed (signal 11)`, with the case saved,
never a hang or a lost run (docs/python.md). Needs Triton."""
import triton
import triton.language as tl


@triton.jit
def wild_store(out):
    tl.store(out + (1 << 40), 7)  # a terabyte past out: no page is mapped there


def topk_decode(logits, next_n, seq_lens, k, out):
    wild_store[(1,)](out)
