"""scripts/upstream.sh run --injected on the CPU: which injected copy each adapter is handed.

`prepare --injected` compiles one build of vLLM's top-k ops per injected bug, each in a folder of
its own under OUT/injected (topk, topk-prefill-cooperative, topk-persistent; docs/upstream.md), and
`run --injected` points MLACHECK_VLLM_SRC at the folder whose build holds the bug on that adapter's
path. A mix-up would check an adapter against a clean copy of its function and call the
injected-bug check passed or failed for the wrong reason, so the mapping is tested here, through
the script itself, with an mlacheck stand-in that records what each check was handed (the real
mlacheck lists the adapters). Label upstream, ctest upstream.vllm."""
import os
import stat
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "upstream.sh")
MLACHECK = os.environ["MLACHECK_BIN"]

# `list` from the real tool; `check`: one line "ADAPTER MLACHECK_VLLM_SRC MLACHECK_SGLANG_SRC" in $STUB_LOG, and a JUnit
# report of one passing property with one case.
STUB = """#!/usr/bin/env bash
if [ "$1" = list ]; then exec "$MLACHECK_REAL" list; fi
adapter=
while [ $# -gt 0 ]; do [ "$1" = --adapter ] && adapter=$2; shift; done
echo "$adapter ${MLACHECK_VLLM_SRC:-unset} ${MLACHECK_SGLANG_SRC:-unset}" >> "$STUB_LOG"
echo '<testsuites><testsuite name="s"><properties><property name="cases_run" value="1"/></properties><testcase name="p"/></testsuite></testsuites>'
"""

TOPK = {
    "vllm_cuda.top_k_per_row_decode": "topk",
    "vllm_cuda.top_k_per_row_prefill": "topk-prefill-cooperative",
    "vllm_cuda.indexer_decode_topk": "topk-prefill-cooperative",
    "vllm_cuda.persistent_topk": "topk-persistent",
}


def run_injected(tmp_path, folders, sglang=False):
    out = tmp_path / "up"
    injected = out / "injected"
    (injected / "vllm").mkdir(parents=True, exist_ok=True)  # the K-cache copies' folder
    if sglang:  # prepare --injected's copy of SGLang's DSA kernels with the sparse decode's bug
        (injected / "sglang" / "sglang").mkdir(parents=True, exist_ok=True)
    for folder in folders:
        lib = injected / folder / "vllm"
        lib.mkdir(parents=True, exist_ok=True)
        (lib / "_C_stable_libtorch.abi3.so").write_bytes(b"")
    stub = tmp_path / "mlacheck"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "handed"
    if log.exists():
        log.unlink()
    env = dict(os.environ, MLACHECK=str(stub), MLACHECK_REAL=MLACHECK, STUB_LOG=str(log))
    p = subprocess.run(["bash", SCRIPT, "run", str(out), "--injected", "--budget", "1", "--jobs", "2"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert p.returncode == 0, p.stdout
    handed = {line.split()[0]: line.split()[1] for line in log.read_text().splitlines()}
    sglang_src = {line.split()[0]: line.split()[2] for line in log.read_text().splitlines()}
    return injected, (handed, sglang_src) if sglang else handed, p.stdout


def test_each_top_k_adapter_is_handed_the_build_with_the_bug_on_its_path(tmp_path):
    injected, handed, out = run_injected(tmp_path, sorted(set(TOPK.values())))
    for adapter, folder in TOPK.items():
        assert handed.get(adapter) == str(injected / folder), (adapter, handed, out)
    # The K-cache adapters get the K-cache copies (OUT/injected/vsrc/vllm links to OUT/injected/vllm).
    for adapter in ("vllm_cuda.indexer_k_quant_and_cache", "vllm_cuda.cp_gather_indexer_k_quant_cache"):
        assert handed.get(adapter) == str(injected / "vsrc"), (adapter, handed, out)
    assert (injected / "results-injected" / "findings.md").is_file(), out


def test_an_adapter_whose_injected_build_is_missing_is_not_checked(tmp_path):
    _, handed, out = run_injected(tmp_path, ["topk", "topk-prefill-cooperative"])
    assert "vllm_cuda.persistent_topk" not in handed, (handed, out)
    assert "vllm_cuda.top_k_per_row_prefill" in handed and "vllm_cuda.top_k_per_row_decode" in handed, (handed, out)


def test_sglang_s_sparse_decode_alone_is_handed_the_copy_with_its_bug(tmp_path):
    injected, (handed, sglang_src), out = run_injected(tmp_path, [], sglang=True)
    assert sglang_src.get("sglang_triton.sparse_decode") == str(injected / "sglang"), (sglang_src, out)
    # the transform adapters' bugs are not in that copy: they are not checked with --injected
    assert not any(a.startswith("sglang_triton.transform") for a in handed), (handed, out)
