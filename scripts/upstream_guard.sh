#!/usr/bin/env bash
# vLLM's own kernel test file for its top-k ops, tests/kernels/test_top_k_per_row.py, run unchanged
# under the guard (docs/guard.md, "A peer's test suite"). Two steps, because the build needs nvcc and
# the run a GPU:
#
#   scripts/upstream_guard.sh build [DIR]           on any machine with nvcc (this one): DIR (default
#                                                   build/upstream-guard) gets two builds of the ops
#                                                   and a test folder; carry DIR to the GPU machine
#   scripts/upstream_guard.sh run DIR MODE [ARGS]   on the GPU machine, mlacheck's Python package on
#                                                   PYTHONPATH (the GPU bundle's share/mlacheck/python)
#
# build: vLLM's source distribution of the version python/upstream.lock pins (its sha256 below),
# downloaded once into ~/.cache/mlacheck/upstream ($MLACHECK_UPSTREAM_CACHE); from its
# csrc/libtorch_stable it compiles sampler.cu (top_k_per_row_decode, top_k_per_row_prefill), topk.cu
# (persistent_topk) and cooperative_topk.cu for sm_90a with the flags vLLM's CMakeLists.txt gives
# its _C_stable_libtorch target, registered in namespace _C with the schemas of its
# torch_bindings.cpp (read from it at build time), against the torch headers of mlacheck's Python
# environment (torch 2.11 on PyTorch's stable C ABI): libvllm_topk_clean.so, and
# libvllm_topk_bug.so, the same but for one injected bug in topKPerRowDecode: the block of the last
# row also stores its first index one row past the end of the indices tensor, which vLLM's own
# assertions (they read the tensor) never see. The test folder holds the test file as the sdist has
# it, and small shims of the two vLLM modules it imports (vllm.platforms.current_platform,
# vllm.utils.torch_utils.set_random_seed) and a conftest that loads $VLLM_TOPK_LIB.
#
# run MODE: plain | guard (`-p mlacheck --mlacheck-guard --mlacheck-guard-scratch
# '_C.*topk:workspace'`: the workspace is scratch its schema does not mark written, finding 9 of
# docs/findings.md) | guard-alloc (the same with the red-zone allocator, --mlacheck-guard-alloc) |
# bug | bug-plain (the bug library under guard-alloc, which it needs: the bug writes past a whole
# tensor, or plain) | bench (each of $BENCH_MODES, default "plain guard guard-alloc", in turn,
# $BENCH_ROUNDS times, default 1: the wall times and their ratios to plain). ARGS go to
# pytest (e.g. -n 8 with pytest-xdist, -k). One test is always left out:
# test_aiter_c4a_topk_kernel_selection imports vLLM's ROCm attention module (no kernel of this path).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
version=$(sed -n 's/^vllm==\([0-9.]*\).*/\1/p' python/upstream.lock)
# The sdist of that version, as PyPI lists it.
sdist_sha256=c03feb07943ecae9e69e7dc424d7c5569ecf8d1292513aef2a4de67af381cd97
[ "$version" = 0.29.0 ] || { echo "upstream_guard: python/upstream.lock pins vLLM $version; this script knows the sdist hash of 0.29.0 only" >&2; exit 2; }

die() { echo "upstream_guard: $*" >&2; exit 2; }

build() {
  local out=${1:-build/upstream-guard}
  local cache="${MLACHECK_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlacheck/upstream}"
  local src="$cache/vllm-$version-sdist"
  local py
  py=$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/mlacheck/pyenv-*/bin/python 2>/dev/null | head -1)
  [ -n "$py" ] || py=python3
  local nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
  [ -x "$nvcc" ] || die "no nvcc at $nvcc (set CUDACXX)"
  "$py" -c "import torch" 2>/dev/null || die "$py has no torch (bash scripts/setup.sh makes mlacheck's Python environment)"
  if [ ! -f "$src/.complete" ]; then
    mkdir -p "$cache"
    local tgz="$cache/vllm-$version.tar.gz"
    if [ ! -f "$tgz" ] || ! echo "$sdist_sha256  $tgz" | sha256sum -c --status; then
      echo "upstream_guard: downloading vLLM $version's source distribution (40 MB) into $cache"
      "$py" - "$version" "$tgz" <<'PY'
import re, sys, urllib.request
version, out = sys.argv[1], sys.argv[2]
page = urllib.request.urlopen("https://pypi.org/simple/vllm/", timeout=120).read().decode()
m = re.search(r'href="([^"]*/vllm-%s\.tar\.gz)#sha256=[0-9a-f]+"' % re.escape(version), page)
if not m:
    sys.exit("upstream_guard: the index lists no source distribution of vLLM %s" % version)
urllib.request.urlretrieve(m.group(1), out)
PY
      echo "$sdist_sha256  $tgz" | sha256sum -c --status || die "$tgz does not have the pinned sha256"
    fi
    rm -rf "$src" && mkdir -p "$src"
    tar -xzf "$tgz" -C "$src" --strip-components=1 "vllm-$version/csrc" "vllm-$version/tests/kernels/test_top_k_per_row.py"
    touch "$src/.complete"
  fi
  local torch_dir
  torch_dir=$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
  # As vLLM's CMakeLists.txt builds _C_stable_libtorch for CUDA 13 and sm_90a (C++20, the stable ABI
  # target version, cooperative top-k on sm_90a).
  local flags=(-std=c++20 -O3 -lineinfo -gencode arch=compute_90a,code=sm_90a -Xcompiler -fPIC
               -Xcompiler -fvisibility=hidden --expt-relaxed-constexpr --compress-mode=size -DENABLE_FP8 -DUSE_CUDA
               -DTORCH_TARGET_VERSION=0x020B000000000000ULL -DVLLM_ENABLE_COOPERATIVE_TOPK=1
               -DTORCH_EXTENSION_NAME=_C_stable_libtorch -I"$torch_dir/include"
               -I"$torch_dir/include/torch/csrc/api/include")
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  local variant
  # $MLACHECK_TOPK_VARIANTS picks the builds (default "clean bug"); upstream.sh prepare --injected
  # asks for the two below as well, the injected copies of the other three top-k adapters.
  for variant in ${MLACHECK_TOPK_VARIANTS:-clean bug}; do
    local dir="$out/build-$variant"
    rm -rf "$dir" && mkdir -p "$dir" && cp -r "$src/csrc" "$dir/csrc"
    "$py" - "$dir/csrc/libtorch_stable" "$variant" <<'PY'
import re, sys
lib, variant = sys.argv[1], sys.argv[2]
ops = ("top_k_per_row_prefill", "top_k_per_row_decode", "persistent_topk", "cooperative_topk")
# The registration: the four ops' schemas as torch_bindings.cpp defines them, their CUDA kernels.
text = open(lib + "/torch_bindings.cpp").read()
defs = []
for op in ops:
    m = re.search(r'ops\.def\(\s*((?:"[^"]*"\s*)+)\);', text[text.index('"%s(' % op) - 40:])
    if not m or '"%s(' % op not in m.group(1):
        sys.exit("upstream_guard: no schema of %s in torch_bindings.cpp" % op)
    defs.append("  ops.def(%s);" % m.group(1).strip())
with open(lib + "/mlacheck_topk_registration.cu", "w") as f:
    f.write("// Written by mlacheck's scripts/upstream_guard.sh: the top-k ops alone, in namespace _C.\n")
    f.write('#include <torch/csrc/stable/library.h>\n#include "ops.h"\n\n')
    f.write("STABLE_TORCH_LIBRARY_FRAGMENT(_C, ops) {\n%s\n}\n\n" % "\n".join(defs))
    f.write("STABLE_TORCH_LIBRARY_IMPL(_C, CUDA, ops) {\n%s\n}\n"
            % "\n".join('  ops.impl("%s", TORCH_BOX(&%s));' % (op, op) for op in ops))
if variant == "bug":
    # The injected bug: after topKPerRowDecode's job, the last row's block stores its first index
    # one row past the end of the indices tensor (the kernels that write the final indices: not the
    # split path's first pass, which writes per-split scratch).
    path = lib + "/sampler.cu"
    src = open(path).read()
    at = src.index("topKPerRowDecode(")
    end = src.index("outIndices, outLogits, stride1, topK);", at) + len("outIndices, outLogits, stride1, topK);")
    bug = ("\n  if constexpr (!multipleBlocksPerRow) {  // mlacheck's injected bug: one row past the output\n"
           "    if (rowIdx == static_cast<int>(gridDim.x) - 1 && threadIdx.x == 0) outIndices[topK] = outIndices[0];\n"
           "  }")
    open(path, "w").write(src[:end] + bug + src[end:])
def inject(name, old, new):
    path = lib + "/" + name
    src = open(path).read()
    if src.count(old) != 1:
        sys.exit("upstream_guard: %s has %d lines '%s', want 1 (another vLLM release?)" % (name, src.count(old), old))
    open(path, "w").write(src.replace(old, new + "  // mlacheck: injected bug"))
if variant == "bug-prefill-cooperative":
    # topKPerRowPrefill takes the row's end as inclusive (one column past [ks, ke) is read), and
    # cooperative_topk's short-row path, the decode step's top-k for at most 64 rows, takes index sl.
    inject("sampler.cu", "int rowEnd = rowEnds[rowIdx];", "int rowEnd = rowEnds[rowIdx] + 1;")
    inject("cooperative_topk.cuh", "out[i] = (i < static_cast<uint32_t>(sl)) ? static_cast<int32_t>(i) : -1;",
           "out[i] = (i <= static_cast<uint32_t>(sl)) ? static_cast<int32_t>(i) : -1;")
if variant == "bug-persistent":
    # persistent_topk's short-row path pads with index 0 where -1 says "no key" (the class of
    # finding 6 and of ROCm's global-index conversion, finding 5).
    inject("persistent_topk.cuh", "row_output[i] = (i < seq_len) ? static_cast<int32_t>(i) : -1;",
           "row_output[i] = (i < seq_len) ? static_cast<int32_t>(i) : 0;")
PY
    echo "upstream_guard: compiling the $variant build (4 units, a few minutes)"
    local u pids=()
    for u in sampler topk cooperative_topk mlacheck_topk_registration; do
      "$nvcc" "${flags[@]}" -I"$dir/csrc" -I"$dir/csrc/libtorch_stable" -c "$dir/csrc/libtorch_stable/$u.cu" \
        -o "$dir/$u.o" > "$dir/$u.log" 2>&1 &
      pids+=($!)
    done
    for u in "${pids[@]}"; do wait "$u" || { cat "$dir"/*.log >&2; die "the $variant build failed"; }; done
    # torch's libraries are linked by name (torch loads them privately: unresolved stable-ABI
    # symbols would not load), cudart statically.
    "$nvcc" "${flags[@]}" "$dir"/*.o -shared -cudart static -Xlinker --no-as-needed -L"$torch_dir/lib" -ltorch \
      -ltorch_cpu -ltorch_cuda -lc10 -o "$out/libvllm_topk_$variant.so"
    rm -rf "$dir"
  done
  # The test folder: the file as vLLM ships it, shims of the two modules it imports, a conftest.
  local t="$out/tests"
  rm -rf "$t" && mkdir -p "$t/vllm/platforms" "$t/vllm/utils"
  cp "$src/tests/kernels/test_top_k_per_row.py" "$t/"
  cp "$repo/examples/upstream/guard_shims/conftest.py" "$t/"
  cp "$repo/examples/upstream/guard_shims/platforms.py" "$t/vllm/platforms/__init__.py"
  cp "$repo/examples/upstream/guard_shims/torch_utils.py" "$t/vllm/utils/torch_utils.py"
  touch "$t/vllm/__init__.py" "$t/vllm/utils/__init__.py"
  printf '[pytest]\n' > "$t/pytest.ini"
  echo "upstream_guard: $out: $(cd "$out" && ls libvllm_topk_*.so | tr '\n' ' ')tests/ (carry it to the GPU machine)"
}

run() {
  local dir=${1:?"run DIR MODE: the folder build made"} mode=${2:?"run DIR MODE: plain, guard, bug, bug-plain or bench"}
  shift 2
  [ -f "$dir/libvllm_topk_clean.so" ] || die "$dir has no libvllm_topk_clean.so (scripts/upstream_guard.sh build makes it)"
  python3 -c "import mlacheck" 2>/dev/null || die "python3 cannot import mlacheck (put the GPU bundle's share/mlacheck/python on PYTHONPATH)"
  local guard=(-p mlacheck --mlacheck-guard --mlacheck-guard-scratch '_C.*topk:workspace')
  local alloc=(-p mlacheck --mlacheck-guard-alloc --mlacheck-guard-scratch '_C.*topk:workspace')
  local base=(-q -p no:cacheprovider -rf test_top_k_per_row.py
              --deselect test_top_k_per_row.py::test_aiter_c4a_topk_kernel_selection)
  cd "$dir/tests"
  case "$mode" in
    plain) VLLM_TOPK_LIB=libvllm_topk_clean.so exec python3 -m pytest "${base[@]}" "$@" ;;
    guard) VLLM_TOPK_LIB=libvllm_topk_clean.so exec python3 -m pytest "${base[@]}" "${guard[@]}" "$@" ;;
    guard-alloc) VLLM_TOPK_LIB=libvllm_topk_clean.so exec python3 -m pytest "${base[@]}" "${alloc[@]}" "$@" ;;
    bug) VLLM_TOPK_LIB=libvllm_topk_bug.so exec python3 -m pytest "${base[@]}" "${alloc[@]}" "$@" ;;
    bug-plain) VLLM_TOPK_LIB=libvllm_topk_bug.so exec python3 -m pytest "${base[@]}" "$@" ;;
    bench)
      local r s e m t_plain=
      for r in $(seq 1 "${BENCH_ROUNDS:-1}"); do
        for m in ${BENCH_MODES:-plain guard guard-alloc}; do
          local flags=()
          case $m in
            plain) ;;
            guard) flags=("${guard[@]}") ;;
            guard-alloc) flags=("${alloc[@]}") ;;
            *) die "bench: BENCH_MODES has '$m' (plain, guard, guard-alloc)" ;;
          esac
          s=$(date +%s%N)
          VLLM_TOPK_LIB=libvllm_topk_clean.so python3 -m pytest "${base[@]}" ${flags[@]+"${flags[@]}"} "$@" \
            > "bench-$m-$r.txt" 2>&1 || true
          e=$(( ($(date +%s%N) - s) / 1000000 ))
          echo "round $r $m: $e ms; $(grep -E '(passed|failed|skipped).* in ' "bench-$m-$r.txt" | tail -1)"
          grep "mlacheck guard:" "bench-$m-$r.txt" || true
          if [ $m = plain ]; then t_plain=$e
          elif [ -n "$t_plain" ]; then echo "round $r: $m / plain = $(python3 -c "print('%.3f' % ($e / $t_plain))")"; fi
        done
      done ;;
    *) die "run: mode '$mode' (plain, guard, guard-alloc, bug, bug-plain or bench)" ;;
  esac
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  *) die "give build [DIR] or run DIR MODE [PYTEST ARGS] (the header of scripts/upstream_guard.sh says more)" ;;
esac
