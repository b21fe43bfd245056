"""Stand-in (tests/upstream/fake_sglang/sglang/MLACHECK_STANDIN): the adapter module loads this file
at import; the stand-in's tests drive sparse_decode only."""
