"""The buggy twin of mla_decode_impl_torch.py: a graph that keeps the sequence lengths it saw at
capture (read back to the host before capturing, as split bounds computed on the host are) instead
of reading the graph's seq_lens buffer at replay: a graph-replay hazard.

    mlacheck check --python examples/python/mla_decode_impl_torch_buggy.py:mla_decode_impl   # FAIL
"""
from mla_decode_impl_torch import Impl, attend


class BuggyImpl(Impl):
    def record(self, c):
        frozen = c.seq_lens.long().clone()  # the capture's lengths, a constant of the graph

        def run():
            attend(c.q, c.kv_cache, c.block_table, c.seq_lens, c.o, c.lse, c.base_scale * c.q_scale * c.k_scale,
                   c.k_scale, lengths=frozen)
        return run


def mla_decode_impl(config, workspace):
    return BuggyImpl(config, workspace)
