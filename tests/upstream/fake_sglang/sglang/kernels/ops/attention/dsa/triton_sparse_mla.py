"""Stand-in (tests/upstream/fake_sglang/sglang/MLACHECK_STANDIN): triton_sparse_mla_decode.py's
stand-in needs nothing from here."""


def _block_k_for_shared_memory(kv_dim, element_size, max_shared_memory):
    return 64 if element_size == 1 else 32
