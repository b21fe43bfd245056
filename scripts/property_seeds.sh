#!/usr/bin/env bash
# The property suite under many seeds: runs every property test binary of a build RUNS times, each
# time with another RapidCheck seed, and prints one line per run. A flaky property (one that fails
# for some seeds on a correct implementation) shows as a FAIL line; its shrunk case is saved under
# $OUT_DIR/seed-<seed>/ (MLACHECK_CASE_DIR) for `mlacheck repro`.
#
#   scripts/property_seeds.sh [BUILD_DIR] [RUNS] [CASES]     (defaults: build/default 20 200)
#
# Seeds are 1..RUNS offset by $SEED_BASE (default: the date as YYYYMMDD00), so a rerun on the same
# day repeats the same seeds and another day tries new ones. Exit 1 if any run failed.
set -uo pipefail
# BUILD_DIR is taken relative to where the script is run from; the default is the repository's.
if [ $# -ge 1 ]; then build=$(cd "$1" 2>/dev/null && pwd) || build=$1; fi
cd "$(dirname "$0")/.."
build=${build:-build/default}
runs=${2:-20}
cases=${3:-200}
base=${SEED_BASE:-$(date +%Y%m%d)00}
out=${OUT_DIR:-$build/property-seeds}
[ -d "$build/tests" ] || { echo "property_seeds: no build at '$build' (build it first: cmake --preset default && cmake --build --preset default)"; exit 2; }
# The binaries holding RapidCheck properties: every test binary linked with RapidCheck.
mapfile -t bins < <(find "$build/tests" -type f -name '*_tests' -perm -u+x | sort | while read -r b; do
  grep -q 'rapidcheck' "$b" 2>/dev/null && echo "$b"; done)
[ "${#bins[@]}" -gt 0 ] || { echo "property_seeds: no property test binaries under $build/tests"; exit 2; }
echo "property_seeds: ${#bins[@]} binaries, $runs runs of $cases cases per property, seeds $((base + 1))..$((base + runs))"
failed=0
for i in $(seq 1 "$runs"); do
  seed=$((base + i))
  dir="$out/seed-$seed"
  mkdir -p "$dir"
  start=$(date +%s)
  bad=()
  for b in "${bins[@]}"; do
    # The GPU tests in these binaries skip without a GPU; the rest run with this seed. Tests that
    # show a property failing on a wrong implementation save cases too: keep a binary's cases and
    # log only when the binary failed.
    name=$(basename "$b")
    mkdir -p "$dir/$name"
    if RC_PARAMS="seed=$seed max_success=$cases" MLACHECK_CASE_DIR="$dir/$name" "$b" >"$dir/$name.log" 2>&1; then
      rm -rf "${dir:?}/$name" "$dir/$name.log"
    else
      bad+=("$name")
    fi
  done
  rmdir "$dir" 2>/dev/null
  secs=$(( $(date +%s) - start ))
  if [ "${#bad[@]}" -eq 0 ]; then
    printf '  seed %s  PASS  %4ds\n' "$seed" "$secs"
  else
    failed=1
    printf '  seed %s  FAIL  %4ds  %s (logs and cases in %s)\n' "$seed" "$secs" "${bad[*]}" "$dir"
  fi
done
[ "$failed" -eq 0 ] && echo "property_seeds: all $runs runs passed" || echo "property_seeds: some runs failed"
exit "$failed"
