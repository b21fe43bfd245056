"""SGLang's released Triton kernels of its DSA decode, driven through mlacheck's adapters on the host
(Triton's interpreter), in every CI run: ctest label `upstream` (docs/upstream.md). The release is the
one python/upstream.lock pins, unpacked by scripts/upstream_cache.sh into the upstream cache; nothing
of it is in this repository.

The decode's index transform passes the whole topk_to_global suite inside its caller's contract, at
any top-k width and at DeepSeek V3.2's 2048; each contract clause is there because the kernel fails
without it (what dsa_backend.py never hands it); and a copy of the release with one injected bug is
caught within 20 cases."""
import json
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
ADAPTER = os.path.join(SOURCE, "python", "mlacheck", "adapters", "sglang_triton.py")
MLACHECK = os.environ["MLACHECK_BIN"]
CACHE = os.environ.get("MLACHECK_UPSTREAM_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "mlacheck", "upstream")
RELEASE = os.path.join(CACHE, "sglang-0.5.23")
CONTRACT = ["page = 1", "decode_lens = 1", "locals one-of in-range", "local contiguous", "global contiguous"]

if not os.path.isfile(os.path.join(RELEASE, ".mlacheck-complete")):
    pytest.skip("skipped: SGLang 0.5.23 is not in the upstream cache %s (scripts/upstream_cache.sh puts it there)"
                % CACHE, allow_module_level=True)


def check(fn, tmp_path, budget, contract=None, src=None, fail_fast=False, fuzz=True):
    env = dict(os.environ)
    if contract is not None:
        env["MLACHECK_PYTHON_CONTRACT"] = "\n".join(contract)
    if src is not None:
        env["MLACHECK_SGLANG_SRC"] = src
    args = [MLACHECK, "check", "--python", "%s:%s" % (ADAPTER, fn), "--budget", str(budget), "--seed", "1",
            "--format", "json", "--save", str(tmp_path)] + (["--fail-fast", "--no-shrink"] if fail_fast else []) + \
        ([] if fuzz else ["--no-fuzz"])
    p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=600)
    out = p.stdout
    start = out.find("{\"backend\"")
    assert start >= 0, out[-3000:]
    return p.returncode, json.loads(out[start:out.rfind("}") + 1])["implementations"][0]


@pytest.mark.parametrize("fn", ["transform_index_decode", "transform_index_decode_2048"])
def test_the_decode_index_transform_passes_inside_its_callers_contract(fn, tmp_path):
    # --no-fuzz: every property's cases and the regressions, then the check ends; the budget only caps
    # a loaded machine. (At a 6 s budget with fuzzing, the property stage's third of it could leave a
    # property without a case on a slow machine: PARTIAL, the machine's verdict, not the kernel's.)
    rc, row = check(fn, tmp_path, 120, fuzz=False)
    assert row["cases_run"] > 0 and not row["failures"], (row["result"], row["verdict"], row["case"])
    assert (rc, row["result"]) == (0, "PASS"), (row["result"], row["verdict"], row.get("unjudged"))


# Each clause left out, the kernel fails on what its caller never hands it: the 2048 kernel reads
# and writes row r at r x 2048 whatever the strides; an index past the request's length reads a
# page-table entry nobody wrote.
@pytest.mark.parametrize("fn, dropped, verdict", [
    ("transform_index_decode_2048", ["local contiguous", "global contiguous"], "guard of global"),
    ("transform_index_decode", ["locals one-of in-range"], "the oracle says -1"),
])
def test_each_contract_clause_is_what_the_kernel_needs(fn, dropped, verdict, tmp_path):
    rc, row = check(fn, tmp_path, 60, contract=[c for c in CONTRACT if c not in dropped] +
                    (["k = 2048"] if fn.endswith("2048") else []), fail_fast=True)
    assert rc == 1 and row["result"] == "FAIL" and verdict in row["verdict"], (row["result"], row["verdict"])


# upstream_cache.sh's copies sglang-<version>-bug and -bug-2048: the tiled kernel's, then the 2048-wide
# kernel's `loaded_topk_indices >= 0` made `> 0`, so index 0 is taken for "no index".
@pytest.mark.parametrize("fn, copy", [("transform_index_decode", "-bug"), ("transform_index_decode_2048", "-bug-2048")])
def test_a_copy_with_an_injected_bug_is_caught_within_20_cases(fn, copy, tmp_path):
    rc, row = check(fn, tmp_path, 60, src=RELEASE + copy, fail_fast=True)
    assert rc == 1 and row["result"] == "FAIL" and row["cases_run"] <= 20, (row["result"], row["cases_run"])
    assert "local 0 -> -1" in row["verdict"], row["verdict"]


# The sparse decode's kernel does not run in Triton's interpreter: on the host the release is refused
# in one line naming the GPU and the stand-in, not run into the interpreter's error.
def test_the_sparse_decode_says_it_needs_a_gpu_on_the_host(tmp_path):
    rc, row = check("sparse_decode", tmp_path, 60, fail_fast=True)
    assert rc == 1 and row["result"] == "FAIL", (row["result"], row["verdict"])
    assert "needs a GPU (--backend cuda)" in row["verdict"] and "fake_sglang" in row["verdict"], row["verdict"]
