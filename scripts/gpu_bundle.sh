#!/usr/bin/env bash
# Builds, on a machine with the dependencies (scripts/setup.sh: Eigen, RapidCheck, GoogleTest,
# Boost.Context, clang, the CUDA toolkit), everything a GPU machine needs to run mlacheck on the
# cuda backend, in one relocatable folder and its tarball. The GPU machine needs only the NVIDIA
# driver (and PyTorch for the two Python benchmarks): no compiler, no CMake, no libraries.
#
#   scripts/gpu_bundle.sh [--arch 90a] [--out build/gpu-bundle] [--no-fuzz] [--jobs N]
#
# --arch     CUDA architectures of the device code (90a: H100/H200; 100a: B200; "90a;100a" both)
# --out      the bundle folder; the tarball is <out>.tar.gz beside it
# --no-fuzz  leave out the libFuzzer harness (its clang + AddressSanitizer build is the slow half)
#
# The bundle (about 11 MB packed; every path inside is relative, so it runs from wherever it is
# unpacked):
#   bin/mlacheck                 the command (finds share/mlacheck/corpus and fuzz/ by itself)
#   fuzz/all_targets_fuzzer      the libFuzzer harness of every target, linked as <target>_fuzzer
#   lib/                         the example plugins (example, production-style, the stateful
#                                metadata builder, MLA impl and decode step, their buggy twins, the
#                                fault fixture) and libmlacheck_torch_bench.so
#   include/mlacheck/plugin.h    to build your own plugin there with nvcc alone
#   tests/                       the GPU tests (run each; "skipped: no GPU" without one)
#   benchmarks/                  indexer_bench.py, mla_bench.py, bench_common.py, guard_check_bench,
#                                python_call_bench (the --python call path per call)
#   share/mlacheck/corpus/       the seed and regression cases
#   share/mlacheck/python/       the Python package (PYTHONPATH), with libmlacheck_guard.so for
#                                mlacheck.guard() and pytest -p mlacheck --mlacheck-guard on CUDA
#   examples/python/, scripts/gpu_python.sh
#                                the Python examples, and every one of them checked on the GPU
#   README.txt                   what to run there
# Exit 0 built, 2 bad usage or a missing tool (one line).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
me=gpu_bundle
die() { echo "$me: $*" >&2; exit 2; }

arch=90a
out="$repo/build/gpu-bundle"
fuzz=1
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) [ $# -ge 2 ] || die "--arch needs a value"; arch=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; out=$2; shift 2 ;;
    --no-fuzz) fuzz=0; shift ;;
    --jobs) [ $# -ge 2 ] || die "--jobs needs a value"; jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case "$jobs" in ''|*[!0-9]*) die "--jobs '$jobs' is not a number" ;; esac
case "$arch" in ''|*[!0-9a-z\;]*) die "--arch '$arch' is not like 90a or \"90a;100a\"" ;; esac
out=$(mkdir -p "$(dirname "$out")" && cd "$(dirname "$out")" && pwd)/$(basename "$out")

export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
[ -x "$CUDACXX" ] || die "no nvcc at $CUDACXX (set CUDACXX)"
command -v cmake >/dev/null || die "no cmake (scripts/setup.sh installs it)"
command -v ninja >/dev/null || die "no ninja (scripts/setup.sh installs it)"
if [ $fuzz -eq 1 ]; then command -v clang++-14 >/dev/null || die "no clang++-14 for the fuzz harness (or --no-fuzz)"; fi

# Each build is configured once and then only rebuilt (a second bundle takes seconds).
build_dir="$repo/build/bundle-cuda"
fuzz_dir="$repo/build/bundle-fuzz"
echo "$me: the cuda build (Release, sm_$arch) in $build_dir"
cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
  -DMLACHECK_CUDA=ON -DMLACHECK_HIP=OFF -DMLACHECK_FUZZ=OFF -DMLACHECK_TORCH_BENCH=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=$arch" \
  >"$build_dir.configure.log" 2>&1 ||
  die "configuring the cuda build failed (see $build_dir.configure.log)"
targets=(mlacheck mlacheck_example_plugin mlacheck_example_plugin_buggy mlacheck_production_plugin
         mlacheck_production_plugin_buggy mlacheck_metadata_plugin mlacheck_metadata_plugin_buggy
         mlacheck_mla_impl_plugin mlacheck_mla_impl_plugin_buggy mlacheck_decode_step_plugin
         mlacheck_decode_step_plugin_buggy
         mlacheck_fixture_plugin_fault mlacheck_torch_bench guard_check_bench python_call_bench mlacheck_guard
         simt_gpu_test core_cuda_runtime_gpu_test core_cuda_guarded_buffer_gpu_test core_cuda_reserved_buffer_gpu_test core_cuda_mapped_slot_gpu_test harness_testbed_gpu_test
         core_codecs_gpu_test)
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}" >"$build_dir.build.log" 2>&1 ||
  die "building the cuda targets failed (see $build_dir.build.log)"
if [ $fuzz -eq 1 ]; then
  echo "$me: the fuzz harness (clang, AddressSanitizer, sm_$arch) in $fuzz_dir"
  cmake -S "$repo" -B "$fuzz_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
    -DCMAKE_CXX_COMPILER=clang++-14 \
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" -DMLACHECK_CUDA=ON -DMLACHECK_HIP=OFF \
    "-DCMAKE_CUDA_ARCHITECTURES=$arch" >"$fuzz_dir.configure.log" 2>&1 ||
    die "configuring the fuzz build failed (see $fuzz_dir.configure.log)"
  cmake --build "$fuzz_dir" -j "$jobs" --target all_targets_fuzzer >"$fuzz_dir.build.log" 2>&1 ||
    die "building the fuzz harness failed (see $fuzz_dir.build.log)"
fi

echo "$me: packing $out"
rm -rf "$out"
mkdir -p "$out"/{bin,fuzz,lib,include/mlacheck,tests,benchmarks,share/mlacheck}
# Release binaries without symbols; the harness keeps its symbol table (no debug info), so its
# sanitizer reports name functions and its crash keys stay readable.
install -m 755 "$build_dir/tools/mlacheck" "$out/bin/"
strip --strip-unneeded "$out/bin/mlacheck"
for so in examples/plugin/libmlacheck_example_plugin.so examples/plugin/libmlacheck_example_plugin_buggy.so \
          examples/production_plugin/libmlacheck_production_plugin.so \
          examples/production_plugin/libmlacheck_production_plugin_buggy.so \
          examples/stateful_plugin/libmlacheck_metadata_plugin.so \
          examples/stateful_plugin/libmlacheck_metadata_plugin_buggy.so \
          examples/stateful_plugin/libmlacheck_mla_impl_plugin.so \
          examples/stateful_plugin/libmlacheck_mla_impl_plugin_buggy.so \
          examples/stateful_plugin/libmlacheck_decode_step_plugin.so \
          examples/stateful_plugin/libmlacheck_decode_step_plugin_buggy.so \
          tests/kernels/libmlacheck_fixture_plugin_fault.so benchmarks/libmlacheck_torch_bench.so; do
  install -m 755 "$build_dir/$so" "$out/lib/"
  strip --strip-unneeded "$out/lib/$(basename "$so")"
done
for t in simt_gpu_test core_cuda_runtime_gpu_test core_cuda_guarded_buffer_gpu_test core_cuda_reserved_buffer_gpu_test core_cuda_mapped_slot_gpu_test harness_testbed_gpu_test \
         core_codecs_gpu_test; do
  path=$(find "$build_dir/tests" -name "$t" -type f -perm -u+x | head -1)
  [ -n "$path" ] || die "built $t but cannot find it under $build_dir/tests"
  install -m 755 "$path" "$out/tests/"
  strip --strip-unneeded "$out/tests/$t"
done
for b in guard_check_bench python_call_bench; do
  install -m 755 "$build_dir/benchmarks/$b" "$out/benchmarks/"
  strip --strip-unneeded "$out/benchmarks/$b"
done
install -m 644 "$repo"/benchmarks/{indexer_bench.py,mla_bench.py,bench_common.py} "$out/benchmarks/"
install -m 644 "$repo/include/mlacheck/plugin.h" "$out/include/mlacheck/"
cp -r "$repo/corpus" "$out/share/mlacheck/corpus"
# The Python package, with the guard's library (built with nvcc: it watches CUDA tensors) beside it.
mkdir -p "$out/share/mlacheck/python"
cp -r "$repo/python/mlacheck" "$out/share/mlacheck/python/"
rm -rf "$out/share/mlacheck/python/mlacheck/__pycache__"
install -m 755 "$build_dir/core/libmlacheck_guard.so" "$out/share/mlacheck/python/mlacheck/"
strip --strip-unneeded "$out/share/mlacheck/python/mlacheck/libmlacheck_guard.so"
rm -f "$out/share/mlacheck/corpus/CMakeLists.txt"
# The Python examples and the script that runs them all on the GPU (docs/python.md), with the
# fixture of a Triton kernel that faults.
mkdir -p "$out/examples" "$out/scripts" "$out/share/mlacheck/fixtures"
cp -r "$repo/examples/python" "$out/examples/python"
rm -rf "$out/examples/python/__pycache__"
install -m 755 "$repo/scripts/gpu_python.sh" "$out/scripts/"
install -m 644 "$repo/tests/tools/python/topk_fault_triton.py" "$out/share/mlacheck/fixtures/"
if [ $fuzz -eq 1 ]; then
  install -m 755 "$fuzz_dir/fuzz/all_targets_fuzzer" "$out/fuzz/"
  strip --strip-debug "$out/fuzz/all_targets_fuzzer"
  for t in $("$out/bin/mlacheck" targets | sed -nE 's/^  ([a-z_0-9]+) .*/\1/p'); do
    ln -s all_targets_fuzzer "$out/fuzz/${t}_fuzzer"
  done
fi
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
cat >"$out/README.txt" <<EOF
mlacheck GPU bundle: commit $commit, device code for sm_$arch, built $(date -u +%Y-%m-%d).
Needs only the NVIDIA driver; every path is relative to this folder.

  bin/mlacheck list                                    # is the cuda backend usable here, and why not
  bin/mlacheck check --backend cuda --budget 60        # every op's reference kernel through its suite
  bin/mlacheck check --backend cuda --plugin lib/libmlacheck_production_plugin.so --contract-probe
  bin/mlacheck check --backend cuda --plugin lib/libmlacheck_decode_step_plugin.so   # the stateful examples:
  bin/mlacheck check --backend cuda --plugin lib/libmlacheck_mla_impl_plugin.so      # also _metadata_; twins *_buggy
  bin/mlacheck mutants --backend cuda --budget 30      # the kill matrix on the GPU
  bin/mlacheck fuzz --target topk_decode --backend cuda --time 600 --plugin lib/libmlacheck_production_plugin.so \\
      --impl topk_decode@production
  bin/mlacheck repro CASE_FILE --backend cuda          # rerun a case file
  scripts/gpu_python.sh --budget 30                    # the Python examples (torch, Triton) on the GPU
  for t in tests/*; do \$t; done                       # the GPU tests
  python3 benchmarks/indexer_bench.py --lib lib/libmlacheck_torch_bench.so   # needs PyTorch
  python3 benchmarks/mla_bench.py --lib lib/libmlacheck_torch_bench.so

Your own plugin, built here with nvcc alone:
  nvcc -std=c++17 -arch=sm_$arch -shared -Xcompiler -fPIC -Iinclude my_plugin.cu -o libmy_plugin.so
  bin/mlacheck check --backend cuda --plugin ./libmy_plugin.so
EOF
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
echo "$me: $out ($(du -sh "$out" | cut -f1)), $out.tar.gz ($(du -h "$out.tar.gz" | cut -f1))"
echo "$me: on the GPU machine: tar xzf $(basename "$out").tar.gz && $(basename "$out")/bin/mlacheck list"
