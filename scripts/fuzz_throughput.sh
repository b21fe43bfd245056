#!/usr/bin/env bash
# Fuzz throughput: each harness of a build from an empty corpus for a fixed time, one process,
# then one line per target: inputs run, libFuzzer's average exec/s (every input, those the case
# rules refuse and those past the budgets included), cases checked per second (the inputs that
# decoded to a case within the budgets and had their property checked), coverage, and the
# harness's own count of refused, skipped (past a budget) and slow inputs. The throughput table of
# docs/log/benchmarks.md comes from it.
#
#   scripts/fuzz_throughput.sh [--build DIR] [--seconds S] [--backend host|cuda] [--targets "a b"]
#
# Defaults: build/asan, 15 s, host, every target. The harness's environment (MLACHECK_FUZZ_MAX_MB,
# MLACHECK_FUZZ_MAX_MS, MLACHECK_CUDA_CACHE, ASAN_OPTIONS) passes through. Exit 1 if a harness
# crashed or found a violation (the line says so), 2 on bad usage.
set -uo pipefail
build=build/asan seconds=15 backend=host targets=""
usage() { echo "usage: scripts/fuzz_throughput.sh [--build DIR] [--seconds S] [--backend host|cuda] [--targets \"a b\"]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=${2:?}; shift 2 ;;
    --seconds) seconds=${2:?}; shift 2 ;;
    --backend) backend=${2:?}; shift 2 ;;
    --targets) targets=${2:?}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "fuzz_throughput: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz_throughput: --seconds '$seconds' is not a whole number of seconds" >&2; exit 2; }
[ -x "$build/tools/mlacheck" ] || { echo "fuzz_throughput: no $build/tools/mlacheck (build the asan preset first)" >&2; exit 2; }
if [ -z "$targets" ]; then
  targets=$("$build/tools/mlacheck" targets | sed -nE 's/^  ([a-z_0-9]+) .*/\1/p' | tr '\n' ' ')
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
printf '%-20s %9s %8s %9s %6s  %s\n' target inputs exec/s checked/s cov "refused / skipped / slow"
for t in $targets; do
  harness="$build/fuzz/${t}_fuzzer"
  [ -x "$harness" ] || { echo "fuzz_throughput: no harness $harness" >&2; exit 2; }
  mkdir -p "$work/$t"
  MLACHECK_BACKEND=$backend timeout $((seconds * 4 + 60)) "$harness" -max_total_time="$seconds" -print_final_stats=1 \
    -timeout=60 "$work/$t" > "$work/$t.log" 2>&1
  rc=$?
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$work/$t.log")
  eps=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$work/$t.log")
  cov=$(grep -oE '^#[0-9]+.*cov: [0-9]+' "$work/$t.log" | tail -1 | grep -oE '[0-9]+$')
  own=$(sed -nE "s/^mlacheck fuzz $t: [0-9]+ inputs run, ([0-9]+) refused.*, ([0-9]+) skipped.*, ([0-9]+) run but.*/\1 \/ \2 \/ \3/p" "$work/$t.log")
  checked=$(sed -nE "s/^mlacheck fuzz $t: ([0-9]+) inputs run,.*/\1/p" "$work/$t.log")
  checked_per_s=$([ -n "$checked" ] && echo $((checked / seconds)))
  if [ $rc -ne 0 ]; then
    status=1
    own="exit $rc: $(grep -m1 -E '==mlacheck== verdict|ERROR:|mlacheck fuzz:' "$work/$t.log")"
  fi
  printf '%-20s %9s %8s %9s %6s  %s\n' "$t" "${runs:-?}" "${eps:-?}" "${checked_per_s:-?}" "${cov:-?}" "$own"
done
exit $status
