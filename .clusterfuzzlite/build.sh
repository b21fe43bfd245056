#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build of the mlacheck fuzz harnesses (OSS-Fuzz build.sh conventions).
#
# In: $SRC/mlacheck (the source), $CC $CXX $CFLAGS $CXXFLAGS (compilers and the sanitizer and
# coverage flags), $LIB_FUZZING_ENGINE (how a harness links its engine), $WORK (scratch; the build
# tree goes to $WORK/mlacheck-build).
# Out, in $OUT, for each harness (an op's, generated for each row of core/ops.def, and each other
# fuzz/<name>_fuzzer.cpp):
#   <name>_fuzzer                  the harness (host backend: CUDA and HIP are off)
#   <name>_fuzzer_seed_corpus.zip  its seeds: the target's corpus/<name>/*.case encoded to fuzz inputs
#                                  with `mlacheck encode`, plus the corpus/regressions cases of its
#                                  properties (for case_text and view_reshape: their corpus files as is)
#   <name>_fuzzer.options          libFuzzer settings for our cases
# Only the harnesses and the mlacheck command (for the encoding) are built. Nothing is downloaded:
# the dependencies are the Debian/Ubuntu packages the Dockerfile installs.

src=$SRC/mlacheck
build=${WORK:-/tmp}/mlacheck-build

# RapidCheck, GoogleTest and Boost.Context come from the distribution, built against libstdc++, so
# the harnesses use libstdc++ too (OSS-Fuzz's default CXXFLAGS ask for libc++).
CXXFLAGS=${CXXFLAGS//-stdlib=libc++/}

cmake -S "$src" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DMLACHECK_CUDA=OFF -DMLACHECK_HIP=OFF -DMLACHECK_FUZZ=ON \
  -DMLACHECK_FUZZ_ENGINE="$LIB_FUZZING_ENGINE"

# Every harness but the all-targets one (the same code as the per-target harnesses, for GPU machines):
# one per op of the op table (its source generated at configure time), and the text, view and
# command-line harnesses of fuzz/.
fuzzers=()
while read -r op; do fuzzers+=("${op}_fuzzer"); done < <(sed -n 's/^MLACHECK_OP(\([a-z_0-9]*\),.*/\1/p' "$src/core/ops.def")
for f in "$src"/fuzz/*_fuzzer.cpp; do
  f=${f##*/}
  [ "$f" = all_targets_fuzzer.cpp ] || fuzzers+=("${f%.cpp}")
done
ninja -C "$build" -j "${MLACHECK_BUILD_JOBS:-$(nproc)}" mlacheck "${fuzzers[@]}"

# mlacheck is built with the same flags: keep its run at build time quiet and side-effect free.
mlacheck() {
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1 LLVM_PROFILE_FILE=/dev/null \
    "$build/tools/mlacheck" "$@"
}

# Which target's harness applies each property (from `mlacheck targets`).
declare -A target_of=()
declare -A is_op_target=()
current=""
while IFS= read -r line; do
  if [[ $line =~ ^\ \ ([a-z0-9_]+)\  ]]; then
    current=${BASH_REMATCH[1]}
    is_op_target[$current]=1
  elif [[ $line =~ ^\ \ \ \ \ \ ([^ ]+) ]] && [ -n "$current" ]; then
    target_of[${BASH_REMATCH[1]}]=$current
  fi
done < <(mlacheck targets)

seeds=$build/seeds
rm -rf "$seeds"
# encode CASE DIR NAME: the fuzz input of a case file (a case that no longer encodes is reported
# and skipped: the seed corpus is a help, not a requirement).
encode() {
  mlacheck encode "$1" "$2/$3" >/dev/null 2>"$build/encode.err" ||
    echo "build.sh: seed $1 skipped: $(head -1 "$build/encode.err")"
}
for f in "${fuzzers[@]}"; do
  t=${f%_fuzzer}
  mkdir -p "$seeds/$t"
  if [ -d "$src/corpus/$t" ]; then
    for c in "$src/corpus/$t"/*; do
      [ -f "$c" ] || continue
      name=${c##*/}
      if [ -n "${is_op_target[$t]:-}" ] && [[ $name == *.case ]]; then
        encode "$c" "$seeds/$t" "${name%.case}"
      else
        cp "$c" "$seeds/$t/$name"
      fi
    done
  fi
done
# Each regression seeds the harness of its property's target.
if [ -d "$src/corpus/regressions" ]; then
  for c in "$src/corpus/regressions"/*.case; do
    [ -f "$c" ] || continue
    property=$(awk '$1 == "property" { print $2; exit }' "$c")
    t=${target_of[$property]:-}
    if [ -z "$t" ] || [ ! -d "$seeds/$t" ]; then
      echo "build.sh: regression $c skipped: no harness applies property '$property'"
      continue
    fi
    name=${c##*/}
    encode "$c" "$seeds/$t" "regression-${name%.case}"
  done
fi

for f in "${fuzzers[@]}"; do
  t=${f%_fuzzer}
  cp "$build/fuzz/$f" "$OUT/$f"
  rm -f "$OUT/${f}_seed_corpus.zip"
  n=$(find "$seeds/$t" -type f | wc -l)
  if [ "$n" -gt 0 ]; then
    (cd "$seeds/$t" && zip -q -X -j "$OUT/${f}_seed_corpus.zip" ./*)
  fi
  # The op harnesses decode up to a few KiB into a case and run it on the host backend (CPU fibers,
  # guarded buffers; a case may stage at most 8 MiB, MLACHECK_FUZZ_MAX_MB, and take at most 200000
  # GPU-thread steps, MLACHECK_FUZZ_MAX_STEPS; larger ones are skipped): `mlacheck fuzz` uses the
  # same max_len and timeout. The text and view parsers are fast.
  if [ -n "${is_op_target[$t]:-}" ]; then
    printf '[libfuzzer]\nmax_len = 8192\ntimeout = 60\nrss_limit_mb = 2560\n' >"$OUT/$f.options"
  else
    printf '[libfuzzer]\nmax_len = 4096\ntimeout = 10\nrss_limit_mb = 2560\n' >"$OUT/$f.options"
  fi
  echo "build.sh: $OUT/$f, $n seed(s)"
done
