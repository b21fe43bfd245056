#!/usr/bin/env bash
# The test suite: set up, build the sanitizer preset (clang 14, ASan + UBSan, libFuzzer) and run
# every ctest label (unit, property, corpus, mutants, fuzz, hip, upstream; gpu tests report
# "skipped: no GPU" without one). Then build the default preset (clang 14, Release, libFuzzer; with
# CUDA when nvcc is present: the build scripts/main.sh installs) and run its suite too, so that the
# installed build is tested as it ships and the GPU tests at least build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The pinned vLLM release whose Triton kernels ctest's `upstream` label drives (docs/upstream.md).
bash scripts/upstream_cache.sh
jobs=$(nproc)
# ctest runs one test more than there are cores: about a sixth of the suite's time is spent waiting
# (a Python worker's start, a hang's case timeout, a child's end), and the extra test uses it. The
# budgeted tests are written for a loaded machine (a case run, not a count of cases, is what they
# ask for). Measured from fresh clones in docs/building.md.
tests=$((jobs + 1))

# RapidCheck cases per property: 250 under the sanitizers (they cost about 5x; what they add is
# memory errors in the kernel code, which 250 cases reach), 1000 in the Release build. The main job
# configures fewer, and its test sources at -O0, in the default build folder, so both are pinned here.
cmake --preset asan -DMLACHECK_PROPERTY_CASES=250 -DMLACHECK_TEST_COMPILE_OPTIONS= >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$tests"

cmake --preset default -DMLACHECK_PROPERTY_CASES=1000 -DMLACHECK_TEST_COMPILE_OPTIONS= >/dev/null  # as main.sh's, at -O2
cmake --build --preset default -j "$jobs"
# What the sanitizer suite has just run on the host is not run again here:
# - the Python tests: they drive the same Python code through the same bridge, and cost minutes of
#   interpreter time (this build runs the Python tests only it has: the stateful examples'
#   corpus-wide same-verdict runs, the guard, the upstream label, the kill matrix's Triton variants);
# - the command-line suites of check, repro and the suite runner (MlacheckCli, SuiteRunner) and the
#   plugin commands (PluginCli) but their first test, which loads Release plugins into the Release
#   tool (the pair a user installs): the same host code, already run under ASan and UBSan.
# - the command line's fuzzer, `fuzz --python` and the fuzzing scripts (cli_fuzzer, PythonFuzz,
#   fuzz_continuous, fuzz_throughput): the same code again.
# Every other test (kernels, oracles, properties at 1000 cases, corpus, mutants.matrix, install, the
# op harnesses this build installs and their kernels' coverage) runs in both builds.
again='python[.](package|env)|PythonCli[.]|PythonFuzz[.]|Interpreted/PythonTritonExamples|Stateful/PythonExamples'
again="$again|MlacheckCli[.]|SuiteRunner[.]|PluginCli[.][A-SU-Z]|PluginCli[.]TheBuggyTwin"
again="$again|cli_fuzzer|fuzz_continuous[.]|fuzz_throughput[.]"
ctest --preset default -j "$tests" -E "^($again)"
