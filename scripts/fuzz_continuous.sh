#!/usr/bin/env bash
# Continuous fuzzing for long jobs on GPU (or CPU) machines: workers that rotate over the fuzz
# targets, each period a supervised `mlacheck fuzz` campaign, sharing one minimal corpus per target
# and one deduplicated crash folder.
#
#   scripts/fuzz_continuous.sh [--backend host|cuda] [--targets "a b c"|all] [--hours H] [--period S]
#                              [--jobs-per-worker N] [--workers N] [--mps auto|on|off] [--out DIR]
#                              [--build DIR] [--impl OP@NAME] [--plugin LIB]...
#   scripts/fuzz_continuous.sh --selftest        (deduplication and GPU placement, on made-up input)
#
# Workers: with --backend cuda one per visible GPU (the ids in CUDA_VISIBLE_DEVICES, else
# `nvidia-smi -L`), each pinned to it (CUDA_VISIBLE_DEVICES=<id>), with nproc / GPUs (at most 8)
# libFuzzer jobs each by default (1 where no MPS daemon can run, below); with --backend host one per
# nproc / jobs (1 job each by default).
# --workers overrides the count (GPUs are then shared round robin). --impl fuzzes that
# implementation (default each target's <op>@ref; a seeded-bug variant, or one of --plugin's), its
# op the one target unless --targets says it.
# Several processes on one GPU (the jobs of a worker) are time-sliced by the driver unless an MPS
# daemon (NVIDIA's Multi-Process Service) lets their kernels share it: without one, 8 processes of
# `mlacheck bench fuzz` on an H100 checked about a third of what one did; with one, 8 checked 4 to
# 8 times as much (docs/fuzzing.md). --mps (cuda only): auto (the default) uses a daemon already
# running ($CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps), else starts one per GPU for the run
# (pipe and log in DIR/mps/gpu<id>, quit at the end) when nvidia-cuda-mps-control is there, else runs 1 job per
# worker unless --jobs-per-worker says otherwise; on: the same, but no daemon is an error; off:
# none (the jobs time-slice the GPU).
# Each worker loops until --hours (default 12) are up or SIGINT/SIGTERM, in periods of --period
# seconds (default 600):
#   1. the next target, round robin (worker w starts at target w, so workers spread out);
#   2. its campaign folder DIR/workers/<w>/<T> gets the shared corpus DIR/corpus/<T> copied into
#      its corpus/ (everyone's finds: `mlacheck fuzz --seeds` reads case files, not raw inputs),
#      then `mlacheck fuzz --target T --backend B --time PERIOD --jobs N --out <that folder>
#      --seeds <repo>/corpus/T --seeds <repo>/corpus/regressions` (libFuzzer fork mode; the case
#      seeds are re-encoded every period);
#   3. the worker's corpus is merged into DIR/corpus/<T> under flock, with the harness's -merge=1
#      (shared corpus first, so only inputs adding coverage to it are added), in the background
#      while the worker's next period fuzzes (a worker waits only for its previous merge);
#   4. its distinct crashes, cases/<property>-<key>.case (key: a hash of the verdict or of the
#      sanitizer kind and top frames), are copied to DIR/crashes/ when no file of that name is there
#      yet (same key, same bug), with one line per new one in DIR/crashes/INDEX:
#      time <tab> worker <tab> target <tab> key <tab> verdict <tab> gpu; a case whose key is already
#      there (the same bug found again, by any worker on any GPU) is not copied: a line in
#      DIR/crashes/SEEN says who found it again.
# --build (default <repo>/build/asan) holds tools/mlacheck (or bin/mlacheck: the GPU bundle of
# scripts/gpu_bundle.sh) and fuzz/<T>_fuzzer, or only fuzz/all_targets_fuzzer (then linked under
# each target's name in DIR/harness/).
# Layout of --out DIR (default ./fuzz-continuous; reusing a folder resumes from its corpus):
#   corpus/<T>/   the shared corpus of each target        crashes/   distinct cases and INDEX
#   workers/<w>/  each worker's campaign folders and worker.log   periods.log   one line per period
#                 (end time, worker, target, exit, new crashes, gpu, seconds fuzzed, inputs, coverage)
# Prints a line per worker period; every --period seconds a status line: inputs run per GPU and in
# all (with inputs a second since the start, merging included), each target's coverage and shared
# corpus, distinct crashes and how many are new; and a summary at the end, with inputs a second per
# GPU, per target, and each distinct crash with who found it first and who again.
# Exit status: 0 no new crash, 1 new distinct crashes found, 2 bad usage or setup (one line).
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
me="fuzz_continuous"

die() {
  echo "$me: $*" >&2
  exit 2
}

usage() {
  sed -n '6,10p' "$0" | sed 's/^# \{0,1\}//'
}

# --- crash deduplication (also used by --selftest) ---------------------------------------------

# collect_crashes CASE_DIR WORKER TARGET [GPU]: copies each case whose name is new to $out/crashes
# and indexes it; a name already there (the same key: the same bug) gets a line in SEEN, once per
# worker and case file; prints how many were new.
collect_crashes() {
  local dir=$1 w=$2 t=$3 g=${4:-}
  (
    flock -x 8
    new=0
    for c in "$dir"/*.case; do
      [ -f "$c" ] || continue
      name=${c##*/}
      key=${name%.case}
      key=${key##*-}
      if [ -e "$out/crashes/$name" ]; then
        # Found again by another worker: who, once per worker (a worker's cases/ keeps its files
        # across periods, and its first finder's own are not news).
        awk -F'\t' -v w="$w" -v k="$key" '$2 == w && $4 == k { f = 1 } END { exit !f }' "$out/crashes/INDEX" ||
          grep -q "	w$w	$t	$key	" "$out/crashes/SEEN" 2>/dev/null ||
          printf '%s\tw%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$w" "$t" "$key" "$g" >>"$out/crashes/SEEN"
        continue
      fi
      cp "$c" "$out/crashes/.$name.tmp" && mv "$out/crashes/.$name.tmp" "$out/crashes/$name" || continue
      # The case's second comment line is the verdict (tools/fuzz_command.cpp writes it so).
      verdict=$(sed -n '2s/^# //p' "$c")
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$w" "$t" "$key" "$verdict" "$g" \
        >>"$out/crashes/INDEX"
      new=$((new + 1))
    done
    echo "$new"
  ) 8>"$out/crashes/.lock"
}

# --- placement (also used by --selftest) -------------------------------------------------------

# find_gpus: the GPU ids of a cuda run into gpus[]: the ones the job was given
# (CUDA_VISIBLE_DEVICES: indices or UUIDs; -1 is none), else every one `nvidia-smi -L` lists.
find_gpus() {
  gpus=()
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    IFS=, read -r -a gpus <<<"$CUDA_VISIBLE_DEVICES"
    [ "${gpus[0]:-}" != "-1" ] || gpus=()
  elif command -v nvidia-smi >/dev/null; then
    local n i
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    for ((i = 0; i < n; i++)); do gpus+=("$i"); done
  fi
}

# place BACKEND CORES MPS_STATE: the libFuzzer jobs of each worker ($jobs, unless given), the
# workers ($workers, unless given) and each worker's GPU (worker_gpu[w]; GPUs round robin) from
# gpus[]. On cuda: a worker per GPU, nproc / GPUs jobs each (1 to 8), but 1 where no MPS daemon
# runs; on the host: 1 job, a worker per core.
place() {
  local backend=$1 cores=$2 mps_state=$3 w
  if [ -z "$jobs" ]; then
    if [ "$backend" = cuda ] && [ "$mps_state" = none ]; then
      jobs=1  # time-sliced, more processes on one GPU check less, not more
    elif [ "$backend" = cuda ]; then
      jobs=$((cores / ${#gpus[@]}))
      ((jobs > 8)) && jobs=8
      ((jobs < 1)) && jobs=1
    else
      jobs=1
    fi
  fi
  if [ -z "$workers" ]; then
    if [ "$backend" = cuda ]; then workers=${#gpus[@]}; else workers=$((cores / jobs)); fi
    ((workers < 1)) && workers=1
  fi
  worker_gpu=()
  for ((w = 0; w < workers; w++)); do
    if [ ${#gpus[@]} -gt 0 ]; then worker_gpu+=("${gpus[$((w % ${#gpus[@]}))]}"); else worker_gpu+=(""); fi
  done
}

# pin_to GPU: the environment (for env) that puts a process on GPU: its daemon's pipe and no
# CUDA_VISIBLE_DEVICES with this run's daemons, else CUDA_VISIBLE_DEVICES=GPU.
pin_to() {
  pin=()
  [ -n "$1" ] || return 0
  if [ $mps_state = started ]; then
    pin=(-u CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY="$out/mps/gpu$1/pipe")
  else
    pin=(CUDA_VISIBLE_DEVICES="$1")
  fi
}

distinct_crashes() {
  find "$out/crashes" -maxdepth 1 -name '*.case' -type f 2>/dev/null | wc -l
}

selftest() {
  local tmp fail=0
  tmp=$(mktemp -d)
  out=$tmp/out
  mkdir -p "$out/crashes" "$tmp/w0/cases" "$tmp/w1/cases"
  : >"$out/crashes/INDEX"
  check() { if eval "$1"; then echo "  ok: $2"; else echo "  FAIL: $2"; fail=1; fi; }
  printf '# found by mlacheck fuzz --target topk_decode --backend host on X\n# topk_decode_matches_oracle: index 3 differs\n# raw input: x\nproperty topk_decode_matches_oracle\n' \
    >"$tmp/w0/cases/topk_decode_matches_oracle-0123456789ab.case"
  # The same bug found by another worker on another GPU (same name, same key), and a second bug.
  cp "$tmp/w0/cases/topk_decode_matches_oracle-0123456789ab.case" "$tmp/w1/cases/"
  printf '# found by mlacheck fuzz --target pack_decode --backend host on X\n# ERROR: AddressSanitizer: heap-buffer-overflow at pack\n# raw input: y\nproperty pack_decode_roundtrip\n' \
    >"$tmp/w1/cases/pack_decode-ba9876543210.case"
  local n0 n1 n2 n3
  n0=$(collect_crashes "$tmp/w0/cases" 0 topk_decode 0)
  n1=$(collect_crashes "$tmp/w1/cases" 1 topk_decode 1)
  n2=$(collect_crashes "$tmp/w0/cases" 0 topk_decode 0)
  n3=$(collect_crashes "$tmp/w1/cases" 1 topk_decode 1)
  echo "$me selftest: workers on GPUs 0 and 1 report the same case file, worker 1 a second bug, each twice"
  check '[ "$n0" = 1 ] && [ "$n1" = 1 ] && [ "$n2" = 0 ] && [ "$n3" = 0 ]' "new per collection 1, 1, 0, 0 (got $n0, $n1, $n2, $n3)"
  check '[ "$(distinct_crashes)" = 2 ]' "2 distinct cases in crashes/ (got $(distinct_crashes))"
  check '[ "$(wc -l <"$out/crashes/INDEX")" = 2 ]' "2 INDEX lines (got $(wc -l <"$out/crashes/INDEX"))"
  check 'awk -F"\t" '"'"'$2==0 && $4=="0123456789ab" && $5=="topk_decode_matches_oracle: index 3 differs" && $6==0'"'"' "$out/crashes/INDEX" | grep -q .' \
    "the first finder (worker 0, GPU 0), key and verdict are indexed"
  check 'grep -q "	1	topk_decode	ba9876543210	ERROR: AddressSanitizer" "$out/crashes/INDEX"' "worker 1's second bug is indexed"
  check '[ "$(wc -l <"$out/crashes/SEEN")" = 1 ] && awk -F"\t" '"'"'$2=="w1" && $4=="0123456789ab" && $5==1'"'"' "$out/crashes/SEEN" | grep -q .' \
    "SEEN: worker 1 on GPU 1 found the first bug again, once however often it reports it"
  check '! ls -A "$out/crashes" | grep -q "\.tmp$"' "no temporary files left"
  sed 's/^/    INDEX: /' "$out/crashes/INDEX"
  sed 's/^/    SEEN:  /' "$out/crashes/SEEN"

  echo "$me selftest: GPU placement on made-up device lists"
  local saved_cvd=${CUDA_VISIBLE_DEVICES-unset} saved_path=$PATH
  mkdir -p "$tmp/bin"
  printf '#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-a)"\necho "GPU 1: NVIDIA H200 (UUID: GPU-b)"\necho "GPU 2: NVIDIA H200 (UUID: GPU-c)"\n' >"$tmp/bin/nvidia-smi"
  chmod +x "$tmp/bin/nvidia-smi"
  PATH=$tmp/bin:$PATH
  unset CUDA_VISIBLE_DEVICES
  find_gpus
  check '[ "${gpus[*]}" = "0 1 2" ]' "nvidia-smi -L's three GPUs, no CUDA_VISIBLE_DEVICES: 0 1 2 (got ${gpus[*]})"
  jobs="" workers=""
  place cuda 32 started
  check '[ "$jobs" = 8 ] && [ "$workers" = 3 ] && [ "${worker_gpu[*]}" = "0 1 2" ]' \
    "3 GPUs, 32 cores, MPS: a worker per GPU, 8 jobs each (got $workers x $jobs on ${worker_gpu[*]})"
  export CUDA_VISIBLE_DEVICES=3,5
  find_gpus
  jobs="" workers=""
  place cuda 32 started
  check '[ "$jobs" = 8 ] && [ "$workers" = 2 ] && [ "${worker_gpu[*]}" = "3 5" ]' \
    "CUDA_VISIBLE_DEVICES=3,5 over nvidia-smi: 2 workers on 3 and 5, 8 jobs each (got $workers x $jobs on ${worker_gpu[*]})"
  jobs="" workers=""
  place cuda 12 started
  check '[ "$jobs" = 6 ]' "12 cores over 2 GPUs: 6 jobs a worker (got $jobs)"
  jobs="" workers=4
  place cuda 32 none
  check '[ "$jobs" = 1 ] && [ "${worker_gpu[*]}" = "3 5 3 5" ]' \
    "--workers 4 on 2 GPUs without MPS: round robin 3 5 3 5, 1 job each (got $jobs on ${worker_gpu[*]})"
  export CUDA_VISIBLE_DEVICES=GPU-a,GPU-b
  find_gpus
  check '[ "${gpus[*]}" = "GPU-a GPU-b" ]' "UUIDs in CUDA_VISIBLE_DEVICES are kept (got ${gpus[*]})"
  export CUDA_VISIBLE_DEVICES=-1
  find_gpus
  check '[ ${#gpus[@]} = 0 ]' "CUDA_VISIBLE_DEVICES=-1: no GPU (got ${#gpus[@]})"
  gpus=()
  jobs="" workers=""
  place host 2 none
  check '[ "$jobs" = 1 ] && [ "$workers" = 2 ] && [ ${#worker_gpu[@]} = 2 ] && [ -z "${worker_gpu[0]}${worker_gpu[1]}" ]' "host, 2 cores: 2 workers of 1 job, no GPU (got $workers x $jobs)"
  mps_state=started
  pin_to 5
  check '[ "${pin[*]}" = "-u CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY=$out/mps/gpu5/pipe" ]' \
    "with this run's daemons a worker on GPU 5 reaches it through gpu5's pipe, no CUDA_VISIBLE_DEVICES (got ${pin[*]})"
  mps_state=none
  pin_to 5
  check '[ "${pin[*]}" = "CUDA_VISIBLE_DEVICES=5" ]' "without them, CUDA_VISIBLE_DEVICES=5 (got ${pin[*]})"
  PATH=$saved_path
  if [ "$saved_cvd" = unset ]; then unset CUDA_VISIBLE_DEVICES; else export CUDA_VISIBLE_DEVICES=$saved_cvd; fi
  rm -rf "$tmp"
  if [ $fail -eq 0 ]; then echo "$me selftest: passed"; else echo "$me selftest: FAILED"; fi
  return $fail
}

# --- options ------------------------------------------------------------------------------------

backend=host targets_arg="" hours=12 period=600 jobs="" workers="" out="" build="" mps=auto impl="" plugins=()
while [ $# -gt 0 ]; do
  case $1 in
    --selftest) selftest; exit $? ;;
    -h | --help) usage; exit 0 ;;
    --backend | --targets | --hours | --period | --jobs-per-worker | --workers | --mps | --out | --build | --impl | --plugin)
      [ $# -ge 2 ] || die "$1 needs a value"
      case $1 in
        --backend) backend=$2 ;;
        --targets) targets_arg=$2 ;;
        --hours) hours=$2 ;;
        --period) period=$2 ;;
        --jobs-per-worker) jobs=$2 ;;
        --workers) workers=$2 ;;
        --mps) mps=$2 ;;
        --out) out=$2 ;;
        --build) build=$2 ;;
        --impl) impl=$2 ;;
        --plugin) [ -f "$2" ] || die "--plugin '$2' is not a file"; plugins+=("$(cd "$(dirname "$2")" && pwd)/$(basename "$2")") ;;
      esac
      shift 2 ;;
    *) die "unknown option '$1' (usage: $(usage | head -1 | sed 's/^ *//'))" ;;
  esac
done

case $backend in host | cuda) ;; *) die "--backend is '$backend', not host or cuda" ;; esac
[[ $hours =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v h="$hours" 'BEGIN{exit !(h > 0)}' || die "--hours needs a positive number, got '$hours'"
[[ $period =~ ^[0-9]+$ ]] && [ "$period" -ge 10 ] || die "--period needs whole seconds, at least 10, got '$period'"
[ -z "$jobs" ] || { [[ $jobs =~ ^[0-9]+$ ]] && [ "$jobs" -ge 1 ]; } || die "--jobs-per-worker needs a positive integer, got '$jobs'"
[ -z "$workers" ] || { [[ $workers =~ ^[0-9]+$ ]] && [ "$workers" -ge 1 ]; } || die "--workers needs a positive integer, got '$workers'"
case $mps in auto | on | off) ;; *) die "--mps is '$mps', not auto, on or off" ;; esac
[ -z "$impl" ] || [[ $impl =~ ^[a-z_0-9]+@[^@[:space:]]+$ ]] || die "--impl is '$impl', not OP@NAME"

# GPUs: the ids the job was given, else every one nvidia-smi sees.
gpus=()
if [ "$backend" = cuda ]; then
  find_gpus
  [ ${#gpus[@]} -gt 0 ] || die "--backend cuda but no GPU (CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES-}', nvidia-smi -L lists none)"
fi

build=${build:-$repo/build/asan}
[ -d "$build" ] || die "no build folder '$build' (cmake --preset asan && cmake --build --preset asan, or pass --build)"
build=$(cd "$build" && pwd)
mlacheck=$build/tools/mlacheck
[ -x "$mlacheck" ] || [ ! -x "$build/bin/mlacheck" ] || mlacheck=$build/bin/mlacheck  # the GPU bundle
[ -x "$mlacheck" ] || die "no mlacheck in $build/tools (ninja -C $build mlacheck)"

mapfile -t known < <("$mlacheck" targets 2>/dev/null | awk '/^  [^ ]/ {print $1}')
[ ${#known[@]} -gt 0 ] || die "'$mlacheck targets' lists no fuzz targets (an old build? ninja -C $build mlacheck)"
# --impl: its op is the target (mlacheck fuzz runs one op's implementation on that op's harness).
impl_args=()
if [ -n "$impl" ]; then
  op=${impl%%@*}
  printf '%s\n' "${known[@]}" | grep -qx -- "$op" || die "--impl '$impl': '$op' is not a fuzz target (targets: ${known[*]})"
  [ -z "$targets_arg" ] || [ "$targets_arg" = "$op" ] || die "--impl '$impl' fuzzes $op alone; --targets '$targets_arg' says otherwise"
  targets_arg=$op
  impl_args=(--impl "$impl")
fi
for p in "${plugins[@]}"; do impl_args+=(--plugin "$p"); done
if [ -z "$targets_arg" ] || [ "$targets_arg" = all ]; then
  targets=("${known[@]}")
else
  read -r -a targets <<<"$targets_arg"
  [ ${#targets[@]} -gt 0 ] || die "--targets is empty"
  for t in "${targets[@]}"; do
    printf '%s\n' "${known[@]}" | grep -qx -- "$t" || die "unknown target '$t' (targets: ${known[*]})"
  done
fi
# The harnesses: fuzz/<T>_fuzzer, else the all-targets harness (fuzz/all_targets_fuzzer, the one
# binary a GPU machine may get) linked under each target's name; MLACHECK_TARGET names the target
# too, since mlacheck fuzz runs the harness by its resolved path.
harness_dir=$build/fuzz
missing=()
for t in "${targets[@]}"; do [ -x "$build/fuzz/${t}_fuzzer" ] || missing+=("$t"); done
if [ ${#missing[@]} -gt 0 ]; then
  [ -x "$build/fuzz/all_targets_fuzzer" ] ||
    die "no harness $build/fuzz/${missing[0]}_fuzzer (ninja -C $build ${missing[0]}_fuzzer)"
  harness_dir=""
fi

out=${out:-$PWD/fuzz-continuous}
mkdir -p "$out/corpus" "$out/crashes" "$out/workers" || die "cannot create '$out'"
out=$(cd "$out" && pwd)

# MPS for the cuda jobs (see the top): "running" (a daemon was there), "started" (ours, quit at
# the end), or "none". The daemons this run starts are one per GPU, each started with that GPU
# alone visible (CUDA_VISIBLE_DEVICES=<id>) and its own pipe folder DIR/mps/gpu<id>; a worker's
# processes reach their GPU through its daemon's pipe, with no CUDA_VISIBLE_DEVICES of their own
# (NVIDIA's MPS guide: "CUDA_VISIBLE_DEVICES should not be set in the client process's
# environment"). One daemon over two H200s, its clients pinned with CUDA_VISIBLE_DEVICES, ran
# fewer inputs on both than one GPU alone did (docs/fuzzing.md).
mps_state=none
if [ "$backend" = cuda ] && [ "$mps" != off ]; then
  mps_pipe=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
  if [ -S "$mps_pipe/control" ] || [ -p "$mps_pipe/control" ]; then
    mps_state=running
    export CUDA_MPS_PIPE_DIRECTORY=$mps_pipe
  elif command -v nvidia-cuda-mps-control >/dev/null; then
    mps_state=started
    for g in "${gpus[@]}"; do
      mkdir -p "$out/mps/gpu$g/pipe" "$out/mps/gpu$g/log"
      env CUDA_VISIBLE_DEVICES="$g" CUDA_MPS_PIPE_DIRECTORY="$out/mps/gpu$g/pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps/gpu$g/log" \
        nvidia-cuda-mps-control -d >/dev/null 2>&1 &&
        for _ in 1 2 3 4 5 6 7 8 9 10; do [ -e "$out/mps/gpu$g/pipe/control" ] && break; sleep 0.2; done
      [ -e "$out/mps/gpu$g/pipe/control" ] || mps_state=none
    done
    [ $mps_state = started ] || for g in "${gpus[@]}"; do
      [ -e "$out/mps/gpu$g/pipe/control" ] && echo quit | CUDA_MPS_PIPE_DIRECTORY="$out/mps/gpu$g/pipe" nvidia-cuda-mps-control >/dev/null 2>&1
    done
  fi
  [ "$mps" = on ] && [ $mps_state = none ] && die "--mps on, but no MPS daemon is running and nvidia-cuda-mps-control could not start one"
fi
stop_mps() {
  local g
  [ $mps_state = started ] && for g in "${gpus[@]}"; do
    echo quit | CUDA_MPS_PIPE_DIRECTORY="$out/mps/gpu$g/pipe" nvidia-cuda-mps-control >/dev/null 2>&1
  done
  mps_state=none
}

place "$backend" "$(nproc)" "$mps_state"

# Harness environment for the merges (what mlacheck fuzz gives its harness runs).
harness_env=(MLACHECK_BACKEND="$backend")
[ -z "$impl" ] || harness_env+=(MLACHECK_IMPL="$impl")
if [ ${#plugins[@]} -gt 0 ]; then
  plugin_list=$(IFS=:; echo "${plugins[*]}")
  harness_env+=(MLACHECK_PLUGIN="$plugin_list")
fi
[ "$backend" = cuda ] && harness_env+=(ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")

if [ -z "$harness_dir" ]; then
  harness_dir=$out/harness
  mkdir -p "$harness_dir"
  for t in "${targets[@]}"; do
    if [ -x "$build/fuzz/${t}_fuzzer" ]; then
      ln -sfn "$build/fuzz/${t}_fuzzer" "$harness_dir/${t}_fuzzer"
    else
      ln -sfn "$build/fuzz/all_targets_fuzzer" "$harness_dir/${t}_fuzzer"
    fi
  done
fi
# The backend works with these harnesses: a harness that cannot set up prints "mlacheck fuzz: why"
# and exits 2 (e.g. --backend cuda with a host-only build). libFuzzer runs one empty input too,
# which may well fail a property: that is not a setup problem.
pre_dir=$(mktemp -d)
pin_to "${gpus[0]:-}"
pre=$(cd "$pre_dir" && env "${pin[@]}" "${harness_env[@]}" MLACHECK_TARGET="${targets[0]}" \
  timeout 300 "$harness_dir/${targets[0]}_fuzzer" -runs=0 -artifact_prefix="$pre_dir/" 2>&1 </dev/null)
pre_rc=$?
rm -rf "$pre_dir"
line=$(grep -m1 '^mlacheck fuzz: ' <<<"$pre" | sed 's/^mlacheck fuzz: //')
[ -z "$line" ] || { stop_mps; die "${targets[0]}_fuzzer cannot run on $backend: $line"; }
case $pre_rc in 0 | 1 | 77) ;; *) stop_mps; die "${targets[0]}_fuzzer does not start (exit $pre_rc): $(tail -1 <<<"$pre")" ;; esac
touch "$out/crashes/INDEX" "$out/periods.log"
rm -f "$out/.stop"

start=$(date +%s)
duration=$(awk -v h="$hours" 'BEGIN{printf "%d", h * 3600}')
deadline=$((start + duration))
min_period=10
crashes_before=$(distinct_crashes)
crashes_at_last_status=$crashes_before

hms() { printf '%d:%02d:%02d' $(($1 / 3600)) $(($1 % 3600 / 60)) $(($1 % 60)); }
stamp() { date +%H:%M:%S; }

# --- a worker -----------------------------------------------------------------------------------

worker() {
  local w=$1 gpu=$2 k=0 fails=0 t tdir left secs rc seeds new line t0 fuzzed inputs cov merging=""
  local wdir=$out/workers/$w
  local pin
  pin_to "$gpu"
  mkdir -p "$wdir"
  while [ ! -e "$out/.stop" ]; do
    left=$((deadline - $(date +%s)))
    ((left >= min_period)) || break
    t=${targets[$(((w + k) % ${#targets[@]}))]}
    k=$((k + 1))
    tdir=$wdir/$t
    mkdir -p "$tdir/corpus" "$out/corpus/$t"
    # Start from everyone's finds.
    flock -s "$out/corpus/$t.lock" cp -Rn "$out/corpus/$t/." "$tdir/corpus/" 2>/dev/null
    secs=$((left < period ? left : period))
    # What would be left after it, under half a period, goes to this period: a last period of a few
    # seconds spends them starting up (re-encoding the seeds) and runs no input.
    ((left - secs < period / 2)) && secs=$left
    seeds=()
    for d in "$repo/corpus/$t" "$repo/corpus/regressions"; do [ -d "$d" ] && seeds+=(--seeds "$d"); done
    {
      echo "=== $(date -u +%FT%TZ) worker $w${gpu:+ gpu $gpu}: $t for $secs s"
    } >>"$wdir/worker.log"
    # Each run in its own session, so the supervisor can end it and every process it started.
    t0=$(date +%s.%N)
    env "${pin[@]}" MLACHECK_TARGET="$t" setsid "$mlacheck" fuzz --target "$t" --backend "$backend" --time "$secs" \
      --jobs "$jobs" --out "$tdir" --harness-dir "$harness_dir" "${impl_args[@]}" "${seeds[@]}" >"$tdir/period.out" 2>&1 </dev/null
    rc=$?
    fuzzed=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    cat "$tdir/period.out" >>"$wdir/worker.log"
    [ -e "$out/.stop" ] && break
    if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
      fails=$((fails + 1))
      line=$(grep -m1 'mlacheck fuzz: ' "$tdir/period.out")
      echo "[$(stamp)] w$w $t: mlacheck fuzz exit $rc: ${line:-see $wdir/worker.log}"
      if ((fails >= 3)); then
        echo "[$(stamp)] w$w: stops after 3 failed periods in a row"
        break
      fi
      sleep 5
      continue
    fi
    fails=0
    new=$(collect_crashes "$tdir/cases" "$w" "$t" "$gpu")
    line=$(grep -m1 "^fuzz $t: " "$tdir/period.out" | sed -E 's/^fuzz [^:]*: ([0-9]+) inputs run.* coverage ([0-9]+).*/\1 inputs, coverage \2/')
    inputs=$(sed -nE 's/^([0-9]+) inputs, coverage ([0-9]+)$/\1/p' <<<"$line")
    cov=$(sed -nE 's/^([0-9]+) inputs, coverage ([0-9]+)$/\2/p' <<<"$line")
    echo "$(date +%s) $w $t $rc $new ${gpu:--} $fuzzed ${inputs:-0} ${cov:-0}" >>"$out/periods.log"
    echo "[$(stamp)] w$w${gpu:+ (gpu $gpu)} $t ${secs}s: ${line:-no stats}; $new new distinct crash(es)"
    # The merge into the shared corpus runs while the next period fuzzes (one process beside the
    # period's jobs): a worker waits only for its previous merge, never for its own replay of the
    # shared corpus. The next period of the same target reads the shared corpus after it (the lock).
    [ -z "$merging" ] || wait "$merging" 2>/dev/null
    merge_into_shared "$w" "$gpu" "$t" "$tdir" &
    merging=$!
  done
  [ -z "$merging" ] || wait "$merging" 2>/dev/null
}

# merge_into_shared W GPU T TDIR: worker W's corpus of target T into the shared corpus, under the
# target's lock; only inputs that add coverage to it come in (the harness's -merge=1, shared corpus
# first). Prints a line with the shared corpus's size before and after.
merge_into_shared() {
  local w=$1 gpu=$2 t=$3 tdir=$4 shared_before shared_after merged pin
  pin_to "$gpu"
  shared_before=$(find "$out/corpus/$t" -maxdepth 1 -type f | wc -l)
  # A crashing input met again here is written as an artifact into a scratch folder of the worker,
  # not the working directory (libFuzzer's default).
  rm -rf "$tdir/merge-artifacts" && mkdir -p "$tdir/merge-artifacts"
  (
    flock -x 9
    env "${pin[@]}" "${harness_env[@]}" MLACHECK_TARGET="$t" MLACHECK_CASE_DIR="$tdir/violations" setsid \
      "$harness_dir/${t}_fuzzer" -merge=1 -max_len=8192 -timeout=60 -rss_limit_mb=8192 \
      -artifact_prefix="$tdir/merge-artifacts/" "$out/corpus/$t" "$tdir/corpus" >"$tdir/merge-shared.log" 2>&1 </dev/null
  ) 9>"$out/corpus/$t.lock"
  merged=$?
  rm -rf "$tdir/merge-artifacts"
  shared_after=$(find "$out/corpus/$t" -maxdepth 1 -type f | wc -l)
  [ $merged -eq 0 ] || shared_after="$shared_after (merge failed: $(tail -1 "$tdir/merge-shared.log"))"
  echo "[$(stamp)] w$w${gpu:+ (gpu $gpu)} $t merged: shared corpus $shared_before -> $shared_after"
}

# --- the supervisor -----------------------------------------------------------------------------

# inputs_line NOW: inputs run by the periods of this run that ended by NOW, per GPU (per worker on
# the host) and in all, each with inputs a second since the start (merging and triage included).
inputs_line() {
  local now=$1
  awk -v s="$start" -v now="$now" '$1 >= s {
      u = ($6 != "" && $6 != "-") ? "gpu " $6 : "w" $2; n[u] += $8; tot += $8
      if (!(u in seen)) { seen[u] = 1; order[++k] = u } }
    END { e = now - s; if (e < 1) e = 1; line = ""
      for (i = 1; i <= k; i++) line = line order[i] " " n[order[i]] " (" sprintf("%.0f", n[order[i]] / e) "/s), "
      printf "%stotal %d (%.0f/s)", line, tot, tot / e }' "$out/periods.log"
}

# target_line: each target's coverage (the highest a period of this run ended at) and shared corpus.
target_line() {
  local t cov line=""
  for t in "${targets[@]}"; do
    cov=$(awk -v s="$start" -v t="$t" '$1 >= s && $3 == t && $9 + 0 > c { c = $9 + 0 } END { print c + 0 }' "$out/periods.log")
    line+="${line:+, }$t cov $cov corpus $(find "$out/corpus/$t" -maxdepth 1 -type f 2>/dev/null | wc -l)"
  done
  echo "$line"
}

crashes_at_last_status=0
status_line() {
  local now n periods
  now=$(date +%s)
  n=$(distinct_crashes)
  periods=$(awk -v s="$start" '$1 >= s' "$out/periods.log" | wc -l)
  echo "[$(stamp)] status $(hms $((now - start))) of $(hms "$duration"): $periods period(s) | inputs $(inputs_line "$now") |" \
    "$(target_line) | distinct crashes $n ($((n - crashes_at_last_status)) new since the last status)"
  crashes_at_last_status=$n
}

pids=()
stop_workers() {
  touch "$out/.stop"
  # The sessions of everything the workers started (each mlacheck and merge run has its own).
  local own sids s
  own=$(ps -o sid= -p $$ | tr -d ' ')
  sids=$(ps -e -o pid=,ppid=,sid= | awk -v roots="${pids[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2; sid[$1] = $3 }
    END { do { more = 0; for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; more = 1 } } while (more)
          for (p in keep) if (p in sid) print sid[p] }' | sort -u)
  kill -TERM "${pids[@]}" 2>/dev/null
  for sig in TERM KILL; do
    for s in $sids; do
      [ "$s" = "$own" ] && continue
      ps -e -o pid=,sid= | awk -v s="$s" '$2 == s {print $1}' | xargs -r kill -"$sig" 2>/dev/null
    done
    [ $sig = TERM ] && sleep 2
  done
  wait "${pids[@]}" 2>/dev/null
}

stopping=""
trap 'stopping=signal' INT TERM

mps_note=""
if [ "$backend" = cuda ]; then
  case $mps_state in
    running) mps_note=" (MPS: the daemon at $CUDA_MPS_PIPE_DIRECTORY)" ;;
    started) mps_note=" (MPS: a daemon per GPU started for this run, $out/mps)" ;;
    none) [ "$jobs" -gt 1 ] && mps_note=" (no MPS: the jobs time-slice each GPU)" || mps_note=" (no MPS: one job per GPU)" ;;
  esac
fi
echo "$me: $workers worker(s) on $backend${gpus[0]:+ (GPUs ${gpus[*]})}, $jobs job(s) each$mps_note, targets ${targets[*]}," \
  "$period s periods for $(hms "$duration"); out $out"
for ((w = 0; w < workers; w++)); do
  worker "$w" "${worker_gpu[$w]:-}" &
  pids+=($!)
done

next_status=$((start + period))
grace=600
while :; do
  alive=0
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive -eq 1 ] || break
  [ -n "$stopping" ] && break
  now=$(date +%s)
  if ((now > deadline + grace)); then
    stopping="overran the time by ${grace} s"
    break
  fi
  if ((now >= next_status)); then
    status_line
    next_status=$((next_status + period))
  fi
  sleep 1 &
  wait $! 2>/dev/null
done

if [ -n "$stopping" ]; then
  echo "[$(stamp)] stopping ($stopping): ending the workers"
  stop_workers
  # Crashes the interrupted periods already wrote.
  for d in "$out"/workers/*/*/cases; do
    [ -d "$d" ] || continue
    w=${d%/*/cases}
    w=${w##*/}
    t=${d%/cases}
    t=${t##*/}
    collect_crashes "$d" "$w" "$t" "${worker_gpu[$w]:-}" >/dev/null
  done
else
  wait "${pids[@]}" 2>/dev/null
fi
trap - INT TERM
stop_mps

end=$(date +%s)
crashes_after=$(distinct_crashes)
new_crashes=$((crashes_after - crashes_before))
echo
echo "$me summary: $(hms $((end - start))) on $backend${gpus[0]:+ (GPUs ${gpus[*]})}, $workers worker(s) x $jobs job(s), ${stopping:-time up}"
echo "  inputs: $(inputs_line "$end")"
for t in "${targets[@]}"; do
  # Inputs a second while a worker fuzzed the target (one worker: one GPU's worth), its coverage.
  awk -v s="$start" -v t="$t" -v c="$(find "$out/corpus/$t" -maxdepth 1 -type f 2>/dev/null | wc -l)" \
    '$1 >= s && $3 == t { n++; i += $8; f += $7; if ($9 + 0 > cov) cov = $9 + 0 }
     END { printf "  %-22s %3d period(s), %d inputs in %.0f s fuzzed (%.0f/s a worker), coverage %d, shared corpus %d inputs\n",
           t, n, i, f, (f > 0 ? i / f : 0), cov, c }' "$out/periods.log"
done
echo "  distinct crashes: $crashes_after ($new_crashes new in this run); index $out/crashes/INDEX"
awk -F'\t' 'FNR == NR { again[$4] = again[$4] (again[$4] == "" ? "" : ", ") $2 ($5 != "" ? " (gpu " $5 ")" : ""); next }
  { printf "    %s  w%s%s  %s  %s  %s\n", $1, $2, ($6 != "" ? " (gpu " $6 ")" : ""), $3, $4, $5
    if ($4 in again) printf "      found again by %s: reported once\n", again[$4] }' \
  <(cat "$out/crashes/SEEN" 2>/dev/null) "$out/crashes/INDEX"
[ "$new_crashes" -gt 0 ] && exit 1
exit 0
