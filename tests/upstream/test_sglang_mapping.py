"""The argument mapping of python/mlacheck/adapters/sglang_triton.py's `sparse_decode` (SGLang
0.5.23's Triton sparse MLA decode as its DSA backend calls it) on the CPU, through the same code
path as on a GPU: MLACHECK_SGLANG_SRC names a stand-in of the release (tests/upstream/fake_sglang)
whose triton_sparse_mla_decode.py computes what the release's docstring says in float32 (the
release's kernel does not run in Triton 3.6's interpreter: its module-level tl.constexpr fails
there). The adapter passes only if it hands q's two views, the indices and the cache on as the caller
does (the cache converted exactly, the tokens the indices name) and copies out back leaving lse
unwritten; the stand-in's injected bug (the one scripts/upstream_cache.sh puts in the real kernel)
fails within 20 cases; each contract clause left out fails. Label upstream, ctest upstream.vllm.
The far-slot property (an 8 GiB reserved cache, a 4 GB bf16 copy) is left to the GPU run
(scripts/upstream.sh)."""
import os

import pytest

from checking import check_json

HERE = os.path.dirname(os.path.abspath(__file__))
MLACHECK = os.environ["MLACHECK_BIN"]
STANDIN = os.path.join(HERE, "fake_sglang")
CONTRACT = ["lse none", "clean_indices", "has_topk_length = 0", "has_attn_sink = 0", "scales dtype ue8m0",
            "precision p bf16"]
PROPERTIES = ["equals_oracle", "rows_independent_of_batch", "topk_permutation_invariant", "deterministic"]


def check(budget, bug=None, contract=None):
    env = dict(os.environ, MLACHECK_SGLANG_SRC=STANDIN)
    env.pop("FAKE_SGLANG_BUG", None)
    env.pop("MLACHECK_PYTHON_CONTRACT", None)
    if bug:
        env["FAKE_SGLANG_BUG"] = bug
    if contract is not None:
        env["MLACHECK_PYTHON_CONTRACT"] = "\n".join(contract)
    args = [MLACHECK, "check", "--adapter", "sglang_triton.sparse_decode", "--budget", str(budget), "--seed", "1",
            "--format", "json", "--no-shrink"]
    for p in PROPERTIES if bug is None and contract is None else PROPERTIES[:1]:
        args += ["--property", "sparse_mla_decode." + p]
    if bug or contract is not None:
        args.append("--fail-fast")
    return check_json(args, env)


def test_the_sparse_decode_adapter_maps_its_arguments_onto_a_stand_in_that_passes():
    # A loaded machine can spend a budget on the worker's start (NO RUN, 0 cases) or leave a property
    # without a case (PARTIAL): the budget then grows. A FAIL ends the loop.
    for budget in (8, 40, 160):
        rc, row, out = check(budget)
        if row["result"] not in ("NO RUN", "PARTIAL"):
            break
    assert rc == 0 and row["result"] == "PASS" and row["cases_run"] > 0, out[-3000:]


def test_the_injected_bug_of_the_fused_kernel_fails_with_coordinates():
    rc, row, out = check(60, bug="inclusive")
    assert rc == 1 and row["result"] == "FAIL" and row["cases_run"] <= 20, out[-3000:]
    assert "out x 2^" in row["verdict"] or "out:" in row["verdict"], row["verdict"]
    assert "worst at [" in row["verdict"], row["verdict"]


# Each clause left out fails: lse is the caller's to do without; a slot past the cache is read
# unchecked; fp32 tile scales make the bf16 cache differ from the values the oracle uses.
@pytest.mark.parametrize("dropped, verdict", [
    ("lse none", "lse:"),
    ("clean_indices", "IndexError"),
    ("scales dtype ue8m0", "elements exceed"),
])
def test_each_contract_clause_is_what_the_kernel_and_its_caller_need(dropped, verdict):
    rc, row, out = check(60, contract=[c for c in CONTRACT if c != dropped])
    assert rc == 1 and row["result"] == "FAIL" and verdict in row["verdict"], out[-3000:]
