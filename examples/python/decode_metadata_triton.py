"""The decode metadata builder with its uniform path as a Triton kernel (docs/ops.md section 1):
decode_metadata_torch.py's builder, whose fused expansion of a uniform batch runs on the GPU as one
Triton program per token row. Runs on a GPU (mlacheck's cuda backend) or, without one, in Triton's
interpreter on the host backend.

    mlacheck check --backend cuda --python examples/python/decode_metadata_triton.py:decode_metadata
    mlacheck check --python examples/python/decode_metadata_triton.py:decode_metadata   # no GPU
"""
import triton
import triton.language as tl

from decode_metadata_torch import Builder


@triton.jit(do_not_specialize=["table_row_stride", "out_row_stride", "d", "width", "out_width"])
def expand_uniform_kernel(seq_lens, block_table, table_row_stride, out_seq_lens, out_decode_lens, out_table,
                          out_row_stride, d, width, out_width, BLOCK_W: tl.constexpr):
    r = tl.program_id(0)  # one token row: token r % d of request r // d
    b = r // d
    t = r % d
    length = tl.load(seq_lens + b)
    tl.store(out_seq_lens + r, tl.maximum(length - d + t + 1, 0))
    tl.store(out_decode_lens + r, 1)
    for c0 in range(0, out_width, BLOCK_W):
        c = c0 + tl.arange(0, BLOCK_W)
        value = tl.load(block_table + b.to(tl.int64) * table_row_stride + c, mask=c < width, other=0)
        tl.store(out_table + r.to(tl.int64) * out_row_stride + c, value, mask=c < out_width)


class TritonBuilder(Builder):
    def write_uniform(self, batch, d, tokens, width):
        table = self.buffers.block_table
        out_width = table.shape[1]
        expand_uniform_kernel[(tokens,)](batch.seq_lens, batch.block_table, batch.block_table.stride(0),
                                         self.buffers.seq_lens, self.buffers.decode_lens, table, table.stride(0), d,
                                         width, out_width, BLOCK_W=min(1024, triton.next_power_of_2(out_width)))


def decode_metadata(limits, buffers):
    return TritonBuilder(limits, buffers)
