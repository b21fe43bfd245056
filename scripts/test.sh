#!/usr/bin/env bash
# The test suite: set up, build the sanitizer preset (clang 14, ASan + UBSan, libFuzzer) and run
# every ctest label (unit, property, corpus, mutants, fuzz, hip; gpu tests report "skipped: no GPU"
# without one). Then build the default g++ preset (with CUDA when nvcc is present) and run its
# suite too, so both compilers stay clean and the GPU tests at least build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)

# RapidCheck cases per property: 250 under the sanitizers (they cost about 5x; what they add is
# memory errors in the kernel code, which 250 cases reach), 1000 in the Release build. The main job
# configures fewer in the same build folder, so both are pinned here.
cmake --preset asan -DMLACHECK_PROPERTY_CASES=250 >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

cmake --preset default -DMLACHECK_PROPERTY_CASES=1000 >/dev/null
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs"
