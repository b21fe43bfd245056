"""The buggy twin of mla_decode_impl_triton.py: the kernel's key loop is bounded by a host integer,
max_seqlen_k, as many Triton attention kernels take it, read back from seq_lens when the launch is
recorded. An eager call reads it afresh and is right; a captured graph keeps the value it saw at
capture, so after the engine writes longer lengths into the graph's seq_lens a replay stops at the
capture's longest sequence and drops every key past it: a graph-replay hazard.

    mlacheck check --python examples/python/mla_decode_impl_triton_buggy.py:mla_decode_impl --budget 30   # FAIL

mlacheck captures a graph over short lengths, then writes longer ones and replays: the replayed o
and lse differ from the oracle (the corpus regression T1-graph-replay-after-lengths-grow-past-capture
catches it after the seed cases, in about 15 s under the interpreter):
    FAIL  regressions: mla_decode_impl.replay_equals_eager: step 1: replay: mla_decode o: 489 of 512
          elements exceed |a-b| <= atol + rtol*|b|; worst at [0, 0, 0, 25] ... (88x the allowed difference)
and the case is saved. Only a replay is wrong: every eager call passes. It is T1 of docs/bugs.md in
Triton, which the kill matrix runs on the host in the interpreter:

    mlacheck mutants --python examples/python/mla_decode_impl_triton_buggy.py:mla_decode_impl   # killed
"""
from mla_decode_impl_triton import TritonImpl, launch


def max_seqlen(seq_lens):
    return int(seq_lens.max()) if seq_lens.numel() else 0  # a device-to-host read


class BuggyImpl(TritonImpl):
    def forward(self, call):
        q_len = call.q.shape[1]
        if call.host_query_lens is not None and any(n != q_len for n in call.host_query_lens):
            raise ValueError("a non-uniform batch (query lengths %s) cannot run as [B, %d]"
                             % (list(call.host_query_lens), q_len))
        launch(call.q, call.kv_cache, call.block_table, call.seq_lens, call.o, call.lse,
               call.base_scale * call.q_scale * call.k_scale, call.k_scale, host_bound=max_seqlen(call.seq_lens))
        return 1

    def record(self, c):
        bound = max_seqlen(c.seq_lens)  # the seeded bug: fixed when the graph is recorded

        def run():
            launch(c.q, c.kv_cache, c.block_table, c.seq_lens, c.o, c.lse, c.base_scale * c.q_scale * c.k_scale,
                   c.k_scale, host_bound=bound)
        return run


def mla_decode_impl(config, workspace):
    return BuggyImpl(config, workspace)


mla_decode_impl.mlacheck_mirrors = "T1"  # the docs/bugs.md row (what @mlacheck.implements(mirrors=) sets)
