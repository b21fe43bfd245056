#!/usr/bin/env bash
# The GPU campaign: in one run of under 10 minutes on a GPU machine, the property suite on the cuda
# backend, every fuzz harness for a fixed short budget, the kill matrix on cuda, the guards' cost per
# launch, and each seeded-bug variant's failing case under compute-sanitizer beside mlacheck; a short
# table last, full logs in the output folder.
#
#   scripts/gpu_campaign.sh [--build DIR] [--fuzz-build DIR] [--out DIR] [--check-seconds S]
#                           [--fuzz-seconds S] [--mutants-seconds S] [--repeats N] [--case-timeout S]
#
# --build       a CUDA build whose tools/mlacheck runs the cuda backend (the `cuda` preset:
#               build/cuda; built with `cmake --build --preset cuda --target mlacheck` it is all
#               this needs)
# --fuzz-build  a build with the libFuzzer harnesses on the cuda backend (the `fuzz-cuda` preset):
#               fuzz/<target>_fuzzer, or only fuzz/all_targets_fuzzer (linked under each name);
#               without it the fuzz step is skipped and says so
# --out         logs and the saved cases (default ./gpu-campaign)
# Budgets (defaults fit 10 minutes on an H200): the property suite 8 s per op (--check-seconds),
# each harness 8 s (--fuzz-seconds), each variant 30 s at most (--mutants-seconds, most die in
# under a second), 20 repeats per kernel for the guard timing (--repeats), each run of step 5 60 s at
# most (--case-timeout: a hang variant's case takes all of it, five times).
#
# The steps:
#   1. `mlacheck check --backend cuda`: every <op>@ref through its op's suite (seed and random cases
#      of every property, the corpus regressions, random fuzzing);
#   2. `scripts/fuzz_throughput.sh --backend cuda`: every harness from an empty corpus;
#   3. `mlacheck mutants --backend cuda --save`: the kill matrix, each kill's case saved; then the
#      variants it lists as not run (reads past a view whose value is never used) under
#      `--sanitize memcheck`;
#   4. `mlacheck bench guards --backend cuda`: plain against guarded launches;
#   5. for each saved case of step 3, the production memory layout (MLACHECK_GUARDS=0: plain
#      allocations of the staged sizes, views inside them; MLACHECK_CUDA_CACHE=0: every block from
#      cudaMalloc, so the sanitizer sees its bounds) run plainly, under `compute-sanitizer --tool
#      memcheck`, `--tool initcheck` and `--tool racecheck`, and under mlacheck's guards (and, when
#      they pass it, under `--sanitize memcheck`); detected by the sanitizer means it reported an
#      error or hazard, by mlacheck that the case failed (a hang: killed at --case-timeout). Each time is the
#      whole command (process start, staging, the oracle), and each slowdown is against the plain
#      run's.
# Exit status: 0 the suite held, no harness found a crash, every variant was killed; 1 otherwise;
# 2 bad usage or setup (one line).
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
me="gpu_campaign"
die() { echo "$me: $*" >&2; exit 2; }

build="$repo/build/cuda" fuzz_build="" out="gpu-campaign"
check_s=8 fuzz_s=8 mutants_s=30 repeats=20 case_s=60
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=${2:?}; shift 2 ;;
    --fuzz-build) fuzz_build=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --check-seconds) check_s=${2:?}; shift 2 ;;
    --fuzz-seconds) fuzz_s=${2:?}; shift 2 ;;
    --mutants-seconds) mutants_s=${2:?}; shift 2 ;;
    --repeats) repeats=${2:?}; shift 2 ;;
    --case-timeout) case_s=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (--help)" ;;
  esac
done
for v in "$check_s" "$fuzz_s" "$mutants_s" "$repeats" "$case_s"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "'$v' is not a whole positive number"
done
# The corpus of this checkout, wherever the binaries were built (they default to their source tree's).
export MLACHECK_CORPUS_DIR="${MLACHECK_CORPUS_DIR:-$repo/corpus}"
mlacheck="$build/tools/mlacheck"
[ -x "$mlacheck" ] || die "no $mlacheck (build the cuda preset's mlacheck; --build DIR)"
# The list is read whole first: grep -q would close the pipe early, and with pipefail mlacheck's
# SIGPIPE would read as "not usable".
backends=$("$mlacheck" list 2>&1)
grep -Eq '^  cuda +usable' <<< "$backends" ||
  die "the cuda backend is not usable here: $(grep -E '^  cuda' <<< "$backends" | sed 's/^ *//')"
command -v compute-sanitizer >/dev/null || [ -x /usr/local/cuda/bin/compute-sanitizer ] ||
  die "no compute-sanitizer on the PATH or in /usr/local/cuda/bin"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
mkdir -p "$out" || die "cannot make $out"
out=$(cd "$out" && pwd)
rm -rf "$out/kills" "$out/fuzz" "$out/cases.log"
status=0
started=$(date +%s)
stamp() { echo "[$(( $(date +%s) - started ))s] $*"; }
device=$("$mlacheck" list | sed -nE 's/^  cuda +usable +//p' | head -1)
# The commit: GPU_CAMPAIGN_COMMIT names it for a copy of the tree whose .git is missing or stale.
commit=${GPU_CAMPAIGN_COMMIT:-$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')}
date -u +"$me: %Y-%m-%d %H:%M UTC on $device, commit $commit" |
  tee "$out/summary.txt"

# 1. The property suite.
stamp "1. property suite on cuda (mlacheck check, $check_s s per op)"
"$mlacheck" check --backend cuda --budget "$check_s" > "$out/check.log" 2> "$out/check.err"
check_rc=$?
[ $check_rc -eq 0 ] || status=1
check_line=$(grep -E '^[0-9]+ of [0-9]+ passed' "$out/check.log" || echo "did not finish (exit $check_rc)")

# 2. The fuzz harnesses.
fuzz_line="skipped: no --fuzz-build"
if [ -n "$fuzz_build" ]; then
  stamp "2. every fuzz harness on cuda ($fuzz_s s each)"
  # fuzz_throughput.sh wants BUILD/tools/mlacheck (for the target list) and BUILD/fuzz/<T>_fuzzer.
  mkdir -p "$out/fuzz/fuzz" "$out/fuzz/tools"
  ln -sf "$(cd "$(dirname "$mlacheck")" && pwd)/mlacheck" "$out/fuzz/tools/mlacheck"
  for t in $("$mlacheck" targets | sed -nE 's/^  ([a-z_0-9]+) .*/\1/p'); do
    if [ -x "$fuzz_build/fuzz/${t}_fuzzer" ]; then
      ln -sf "$(cd "$fuzz_build/fuzz" && pwd)/${t}_fuzzer" "$out/fuzz/fuzz/${t}_fuzzer"
    elif [ -x "$fuzz_build/fuzz/all_targets_fuzzer" ]; then
      ln -sf "$(cd "$fuzz_build/fuzz" && pwd)/all_targets_fuzzer" "$out/fuzz/fuzz/${t}_fuzzer"
    else
      die "no harness for $t in $fuzz_build/fuzz"
    fi
  done
  "$repo/scripts/fuzz_throughput.sh" --build "$out/fuzz" --backend cuda --seconds "$fuzz_s" > "$out/fuzz.log" 2>&1
  fuzz_rc=$?
  [ $fuzz_rc -eq 0 ] || status=1
  fuzz_line="$(($(wc -l < "$out/fuzz.log") - 1)) harnesses, $(grep -c 'exit ' "$out/fuzz.log") with a crash or violation"
fi

# 3. The kill matrix.
stamp "3. kill matrix on cuda (mlacheck mutants, up to $mutants_s s per variant)"
"$mlacheck" mutants --backend cuda --budget "$mutants_s" --save "$out/kills" > "$out/mutants.log" 2> "$out/mutants.err"
mutants_rc=$?
[ $mutants_rc -eq 0 ] || status=1
mutants_line=$(grep -E '^[0-9]+ of [0-9]+ (runnable )?killed' "$out/mutants.log" || echo "did not finish (exit $mutants_rc)")
# 3b. The variants only a read fence sees ("not run" above): under --sanitize memcheck.
fenced=$(sed -nE 's/^not run: ([a-z_0-9]+@[A-Za-z0-9]+): .*--sanitize memcheck.*/\1/p' "$out/mutants.log")
if [ -n "$fenced" ]; then
  stamp "3b. the read variants under --sanitize memcheck ($(echo $fenced))"
  only=()
  for v in $fenced; do only+=(--only "$v"); done
  "$mlacheck" mutants --backend cuda --budget "$mutants_s" --sanitize memcheck "${only[@]}" --save "$out/kills" \
    > "$out/mutants_fenced.log" 2> "$out/mutants_fenced.err"
  fenced_rc=$?
  [ $fenced_rc -eq 0 ] || status=1
  mutants_line="$mutants_line; under --sanitize memcheck: $(grep -E '^[0-9]+ of [0-9]+ (runnable )?killed' "$out/mutants_fenced.log" | grep -v '^=' || echo "did not finish (exit $fenced_rc)")"
fi

# 4. The guards' cost per launch.
stamp "4. guard overhead (mlacheck bench guards, $repeats repeats)"
"$mlacheck" bench guards --backend cuda --repeats "$repeats" > "$out/guards.log" 2>&1 || status=1
guards_line=$(grep -E '^median ratio' "$out/guards.log" || echo "did not finish")

# 5. Each variant's failing case: plainly, under the sanitizer, under mlacheck.
stamp "5. each variant's case beside compute-sanitizer"
# timed VAR CMD...: runs CMD with its output appended to $case_log; VAR gets its wall seconds and
# last_rc its exit status (no command substitution: that would run it in a subshell).
timed() {
  local var=$1 s e
  shift
  s=$(date +%s%N)
  "$@" >> "$case_log" 2>&1
  last_rc=$?
  e=$(date +%s%N)
  printf -v "$var" '%s' "$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
yesno() { if [ -z "$1" ]; then echo "?"; elif [ "$1" -gt 0 ]; then echo "yes ($1)"; else echo "no"; fi; }
# The errors or hazards a sanitizer run reported, from the end of the case log ("" when it printed no
# summary: it did not finish within its timeout).
found() { tail -8 "$case_log" | grep -Eo "(ERROR|RACECHECK) SUMMARY: [0-9]+( hazards)?" | tail -1 | grep -Eo '[0-9]+' | head -1; }
table="$out/sanitizer_table.txt"
printf '%-26s %-9s %-9s %-9s %-56s %8s %9s %9s %9s %9s\n' variant memcheck initcheck racecheck "mlacheck (which check)" \
  "plain s" "memcheck" "initcheck" "racecheck" "mlacheck" > "$table"
for c in "$out"/kills/*.case; do
  [ -e "$c" ] || continue
  case "$c" in *-false-positive-on-ref.case) continue ;; esac
  variant=$(sed -nE 's/^impl (.*)/\1/p' "$c" | head -1)
  case_log="$out/cases.log"
  echo "=== $variant: $c" >> "$case_log"
  # Every run under a time limit: a hang variant's case never ends by itself.
  plain="env MLACHECK_GUARDS=0 MLACHECK_CUDA_CACHE=0 $mlacheck repro $c --backend cuda"
  timed t_plain timeout "$case_s" $plain
  timed t_mem timeout "$case_s" "$sanitizer" --tool memcheck --target-processes all $plain
  mem=$(found)
  timed t_init timeout "$case_s" "$sanitizer" --tool initcheck --target-processes all $plain
  init=$(found)
  timed t_race timeout "$case_s" "$sanitizer" --tool racecheck --target-processes all $plain
  race=$(found)
  timed t_ml timeout "$case_s" env MLACHECK_CUDA_CACHE=0 "$mlacheck" repro "$c" --backend cuda
  ml_rc=$last_rc
  check=$(sed -nE 's/^property (.*)/\1/p' "$c" | head -1)
  how=""
  if [ "$ml_rc" -eq 0 ]; then  # a read whose value is never used: only the views as NVTX regions see it
    timed t_ml timeout "$case_s" env MLACHECK_CUDA_CACHE=0 "$mlacheck" repro "$c" --backend cuda --sanitize memcheck
    ml_rc=$last_rc
    how=" (--sanitize memcheck)"
  fi
  case "$ml_rc" in
    1) verdict="yes, $check$how" ;;
    124|137) verdict="yes, hang (killed at $case_s s)" ;;
    *) verdict="no (exit $ml_rc)" ;;
  esac
  printf '%-26s %-9s %-9s %-9s %-56s %8.2f %8sx %8sx %8sx %8sx\n' "$variant" "$(yesno "$mem")" "$(yesno "$init")" \
    "$(yesno "$race")" "$verdict" "$t_plain" "$(ratio "$t_mem" "$t_plain")" "$(ratio "$t_init" "$t_plain")" \
    "$(ratio "$t_race" "$t_plain")" "$(ratio "$t_ml" "$t_plain")" >> "$table"
done

stamp "done"
{
  echo
  echo "property suite (cuda): $check_line"
  echo "fuzz harnesses (cuda, $fuzz_s s each): $fuzz_line"
  echo "kill matrix (cuda): $mutants_line"
  echo "guard overhead: $guards_line"
  echo
  cat "$out/guards.log"
  echo
  echo "seeded-bug variants: detected by compute-sanitizer (plain production layout) and by mlacheck; times vs the plain run"
  cat "$table"
  echo
  echo "logs: $out (check.log, fuzz.log, mutants.log, guards.log, cases.log; kills/ holds the cases)"
} | tee -a "$out/summary.txt"
exit $status
