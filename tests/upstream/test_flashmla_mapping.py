"""The argument mapping of python/mlacheck/adapters/vllm_flashmla.py's dense adapters
(`dense_decode`, `dense_decode_fp8`: FlashMLA's dense decode as vLLM 0.29.0's FLASHMLA backend calls
it) on the CPU, through the same code path as on a GPU: MLACHECK_VLLM_SRC names a stand-in of the
release (tests/upstream/fake_vllm) whose interface files compute what FlashMLA's docstring says in
float64. The adapter passes only if it hands on q, the cache, the block table, the lengths and the
scales as the caller does and copies out and the transposed lse back; each stand-in's injected bug
(the one scripts/upstream.sh --injected puts in the real files) fails. Label upstream, ctest
upstream.vllm."""
import os

import pytest

from checking import check_json

HERE = os.path.dirname(os.path.abspath(__file__))
MLACHECK = os.environ["MLACHECK_BIN"]
STANDIN = os.path.join(HERE, "fake_vllm")


def check(adapter, budget, bug=None):
    env = dict(os.environ, MLACHECK_VLLM_SRC=STANDIN)
    env.pop("FAKE_FLASHMLA_BUG", None)
    if bug:
        env["FAKE_FLASHMLA_BUG"] = bug
    args = [MLACHECK, "check", "--adapter", "vllm_flashmla." + adapter, "--budget", str(budget), "--seed", "1",
            "--property", "mla_decode.equals_oracle", "--format", "json", "--no-shrink"]
    if bug:
        args.append("--fail-fast")
    return check_json(args, env)


@pytest.mark.parametrize("adapter", ["dense_decode", "dense_decode_fp8"])
def test_the_dense_adapters_map_their_arguments_onto_a_stand_in_that_passes(adapter):
    # A loaded machine can spend a budget on the worker's start (NO RUN, 0 cases) or leave a property
    # without a case (PARTIAL): the budget then grows. A FAIL ends the loop.
    for budget in (8, 40, 160):
        rc, row, out = check(adapter, budget)
        if row["result"] not in ("NO RUN", "PARTIAL"):
            break
    assert rc == 0 and row["result"] == "PASS" and row["cases_run"] > 0, out[-3000:]


@pytest.mark.parametrize("adapter, bug", [("dense_decode", "causal"), ("dense_decode_fp8", "descale")])
def test_the_injected_bug_of_each_dense_interface_fails(adapter, bug):
    rc, row, out = check(adapter, 60, bug)
    assert rc == 1 and row["result"] == "FAIL" and row["cases_run"] <= 20, out[-3000:]
