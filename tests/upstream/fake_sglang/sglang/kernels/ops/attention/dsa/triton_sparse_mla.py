"""Stand-in (tests/upstream/fake_sglang/sglang/MLACHECK_STANDIN): triton_sparse_mla_decode.py's
stand-in needs nothing from here."""
