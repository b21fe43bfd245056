"""Adapters that drive released third-party kernels through `mlacheck check --python FILE:FN`.

vllm_triton.py: vLLM's Triton kernels on the DSA / MLA decode path (vllm_release.py loads the
release that scripts/upstream_cache.sh put in the upstream cache; mlacheck's worker makes Triton's
interpreter compute bf16 as a GPU does). Pass the module by file path, e.g.

    mlacheck check --python python/mlacheck/adapters/vllm_triton.py:decode_metadata

Nothing is imported here: each adapter module needs torch and Triton.
"""
