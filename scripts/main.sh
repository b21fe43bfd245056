#!/usr/bin/env bash
# The main job: set up, build (sanitizer preset: clang, ASan+UBSan, libFuzzer), then a short run of
# the self-checks, the property suite (MLACHECK_MAIN_CASES cases per property, default 100; the test
# command runs 250 under the sanitizers and 1000 in Release), every fuzz harness's ctest, and a short
# fuzzing campaign on every op's harness (MLACHECK_MAIN_FUZZ_SECONDS each, default 10) and the kill
# matrix of the seeded-bug variants, with summaries.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
preset=asan
jobs=$(nproc)
cmake --preset "$preset" -DMLACHECK_PROPERTY_CASES="${MLACHECK_MAIN_CASES:-100}" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
build=build/$preset

echo
status=0
"$build/tools/mlacheck" selfcheck || status=1
echo
echo "property suite and fuzz harnesses (ctest -L 'property|fuzz'):"
ctest --preset "$preset" -L 'property|fuzz' -j "$jobs" --output-on-failure 2>&1 | grep -E 'tests passed|Failed|FAILED|sec\*proc|violated' || status=1
echo
fuzz_seconds="${MLACHECK_MAIN_FUZZ_SECONDS:-10}"
echo "fuzzing campaign: every op's harness on the host backend for ${fuzz_seconds} s (mlacheck fuzz --target all):"
rm -rf "$build/main-fuzz"
"$build/tools/mlacheck" fuzz --target all --time "$fuzz_seconds" --jobs "$jobs" --minimize 10 --out "$build/main-fuzz" \
  | grep -Ev '^\s+\[' || status=1
echo
echo "kill matrix: every seeded-bug variant of docs/bugs.md on the host backend (mlacheck mutants):"
"$build/tools/mlacheck" mutants --backend host --budget 60 2>/dev/null | cut -c1-160 || status=1
echo
if [ $status -eq 0 ]; then echo "main job: all checks passed"; else echo "main job: FAILED (see above)"; fi
exit $status
