#!/usr/bin/env bash
# Every shipped adapter of an upstream GPU kernel (python/mlacheck/adapters/: vLLM's compiled
# library, FlashMLA's sparse and dense decode as vLLM ships it, DeepGEMM's paged MQA logits, SGLang's
# Triton DSA kernels: its sparse MLA decode and decode index transform) checked on a GPU
# machine, with a JUnit file and a findings table (docs/upstream.md, "Every adapter on a GPU").
# Three steps, because the GPU machine has no network:
#
#   scripts/upstream.sh prepare OUT [--deepgemm CHECKOUT] [--injected] [--from-source]
#                                                           here: what the GPU machine needs, in OUT
#   scripts/upstream.sh build OUT                           there: unpack vLLM's libraries, build DeepGEMM
#   scripts/upstream.sh run OUT [--budget S] [--jobs N] [--seed N] [--adapter NAME]... [--injected]
#                                                           there: check each adapter for S seconds
#
# prepare: vLLM's libraries from the upstream cache (scripts/upstream_cache.sh --compiled, the
#   release python/upstream.lock pins), _C_stable_libtorch.abi3.so xz-packed (OUT/vllm, 57 MB), and,
#   given a DeepGEMM checkout with its submodules (`git clone --recursive`, then `git checkout REV`),
#   the sources its build and its run-time compiler need, laid out as DeepGEMM's setup.py lays them
#   out (OUT/deepgemm/src.tar.gz, 3 MB, with the revisions in REVISIONS). Carry OUT/vllm and
#   OUT/deepgemm in separate calls if a call carries at most 64 MiB (the device tool's limit), or
#   use --from-source: OUT/vllm then holds, instead of the wheel's 81 MB library, the indexer K-cache
#   insert and gather compiled from the release's sdist unmodified (4 MB, nvcc, sm_90a; the top-k
#   adapters are then not run), and the whole of OUT travels in one call.
# build: on the GPU machine, with its python3 and torch: unpacks the libraries into OUT/vsrc (the
#   folder MLACHECK_VLLM_SRC names) and compiles DeepGEMM's one host unit, csrc/python_api.cpp, into
#   its Python package as vLLM's tools/build_deepgemm_C.py does (one g++ call against torch's
#   headers and libraries, C++20; $DEEPGEMM_CXXFLAGS, e.g. -g1, is appended); DeepGEMM compiles its
#   kernels itself when first called (nvcc).
# run --injected: the same on the copies with one injected bug each (prepare --injected: vLLM's K-cache
#   insert and gather, its four top-k ops, FlashMLA's dense and sparse decode interfaces, SGLang's
#   sparse decode; build:
#   DeepGEMM's kernel), with
#   --fail-fast; results in OUT/injected/results-injected.
# run: `mlacheck check --backend cuda --adapter NAME --budget S --format junit` for each adapter
#   whose library is there (all of them by default; --adapter picks), N at a time on the one GPU
#   (--jobs, default 1: each check its own process, Python worker and CUDA context; docs/upstream.md
#   says what ran at once); OUT/results/NAME.xml, NAME.log (the check's table), failing cases in NAME-cases/,
#   and OUT/results/findings.md, one row per adapter: verdict, cases, the first failure of each
#   failing property. The check's budget is its fuzzing: seed and regression cases, then random
#   cases until S (600: the ten minutes docs/upstream.md asks of each adapter).
#
# $MLACHECK names the mlacheck to run (default: the one on PATH, else build/default/tools/mlacheck).
# Exit 0 every adapter passed, 1 one did not (FAIL, PARTIAL, NO RUN), 2 bad usage or a missing piece
# (one line).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
me=upstream
die() { echo "$me: $*" >&2; exit 2; }

version=$(sed -n 's/^vllm==\([0-9.]*\).*/\1/p' python/upstream.lock)
cache="${MLACHECK_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlacheck/upstream}"

prepare() {
  local out=$1; shift
  local dg="" injected=0 from_source=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --deepgemm) [ $# -ge 2 ] || die "--deepgemm takes a checkout"; dg=$2; shift 2 ;;
      --injected) injected=1; shift ;;
      --from-source) from_source=1; shift ;;
      *) die "prepare: unknown argument '$1' (takes --deepgemm CHECKOUT, --injected, --from-source)" ;;
    esac
  done
  mkdir -p "$out/vllm"
  bash scripts/upstream_cache.sh --compiled
  local root="$cache/vllm-$version/vllm"
  if [ "$from_source" = 1 ]; then
    rm -f "$out/vllm/_C_stable_libtorch.abi3.so.xz"
    [ -f "$out/vllm/FROM_SOURCE" ] || cache_ops_library "$out/vllm" 0
  elif [ ! -f "$out/vllm/_C_stable_libtorch.abi3.so.xz" ]; then
    rm -f "$out/vllm/FROM_SOURCE" "$out/vllm/_C_stable_libtorch.abi3.so"
    echo "$me: packing vLLM $version's _C_stable_libtorch.abi3.so (xz, a minute)"
    xz -T0 -c "$root/_C_stable_libtorch.abi3.so" > "$out/vllm/_C_stable_libtorch.abi3.so.xz.part"
    mv "$out/vllm/_C_stable_libtorch.abi3.so.xz.part" "$out/vllm/_C_stable_libtorch.abi3.so.xz"
  fi
  cp "$root/_flashmla_C.abi3.so" "$root/_flashmla_extension_C.abi3.so" "$root/third_party/flashmla/flash_mla_interface.py" \
    "$out/vllm/"
  cp "$root/v1/attention/ops/flashmla.py" "$out/vllm/ops_flashmla.py"
  if [ "$from_source" = 1 ]; then
    echo "vllm $version (python/upstream.lock): the wheel's FlashMLA libraries; _C_stable_libtorch.abi3.so holds only the indexer K-cache insert and gather, compiled from the sdist's csrc/libtorch_stable/cache_kernels.cu unmodified" > "$out/vllm/REVISIONS"
  else
    echo "vllm $version (python/upstream.lock)" > "$out/vllm/REVISIONS"
  fi
  if [ -n "$dg" ]; then
    [ -f "$dg/csrc/python_api.cpp" ] || die "--deepgemm $dg: not a DeepGEMM checkout (no csrc/python_api.cpp)"
    [ -d "$dg/third-party/cutlass/include/cute" ] && [ -f "$dg/third-party/fmt/include/fmt/format.h" ] ||
      die "--deepgemm $dg: its submodules third-party/cutlass and third-party/fmt are empty (git submodule update --init)"
    mkdir -p "$out/deepgemm"
    local stage
    stage=$(mktemp -d)
    mkdir -p "$stage/src/deep_gemm/include" "$stage/src/third-party/fmt"
    cp -r "$dg/csrc" "$dg/LICENSE" "$stage/src/"
    cp -r "$dg/deep_gemm/." "$stage/src/deep_gemm/"
    # setup.py's prepare_includes: cutlass's cute and cutlass headers beside DeepGEMM's own, where
    # its run-time compiler looks; its generated envs.py (no DG_JIT_* variables set at build time).
    cp -r "$dg/third-party/cutlass/include/cute" "$dg/third-party/cutlass/include/cutlass" "$stage/src/deep_gemm/include/"
    cp -r "$dg/third-party/fmt/include" "$stage/src/third-party/fmt/"
    echo "persistent_envs = dict()" > "$stage/src/deep_gemm/envs.py"
    local rev="(not a git checkout)"
    rev=$(git -C "$dg" log -1 --format='%H %ad %s' --date=short 2>/dev/null || echo "$rev")
    {
      echo "DeepGEMM $rev"
      echo "cutlass $(git -C "$dg/third-party/cutlass" rev-parse HEAD 2>/dev/null || echo '(not a git checkout)')"
      echo "fmt $(git -C "$dg/third-party/fmt" rev-parse HEAD 2>/dev/null || echo '(not a git checkout)')"
    } > "$out/deepgemm/REVISIONS"
    tar -czf "$out/deepgemm/src.tar.gz" -C "$stage" src
    rm -rf "$stage"
  fi
  # SGLang's DSA kernels (Python and Triton: nothing to build), and the copy whose sparse decode's
  # fused kernel has its injected bug (scripts/upstream_cache.sh's sglang-<version>-bug-sparse).
  local sversion
  sversion=$(sed -n 's/^sglang==\([0-9.]*\).*/\1/p' python/upstream.lock)
  rm -rf "$out/sglang" && mkdir -p "$out/sglang" && cp -r "$cache/sglang-$sversion/." "$out/sglang/"
  if [ "$injected" = 1 ]; then
    rm -rf "$out/injected/sglang" && mkdir -p "$out/injected/sglang"
    cp -r "$cache/sglang-$sversion-bug-sparse/." "$out/injected/sglang/"
  fi
  [ "$injected" = 0 ] || { [ -f "$out/injected/vllm/_C_stable_libtorch.abi3.so" ] || cache_ops_library "$out/injected/vllm" 1; injected_flashmla "$out/injected/vllm"; injected_topk "$out/injected"; }
  du -sh "$out"/* | sed "s/^/$me: /"
}

# --injected: vLLM's indexer K-cache insert and gather with one realistic bug each, for the
# adapters' injected-bug checks: csrc/libtorch_stable/cache_kernels.cu of the release's source distribution (the one
# scripts/upstream_guard.sh build unpacks) with indexer_k_quant_and_cache_kernel's padding test
# `slot_idx < 0` made `slot_idx < -1`, so a padding token (slot -1) is not skipped: C++ division
# makes it block 0, offset -1, and its codes and scale land before the slots of block 0; and in
# cp_gather_indexer_k_quant_cache_kernel the row test without `batch < 0` (below). Built for
# sm_90a against mlacheck's torch as upstream_guard.sh builds the top-k (the stable ABI), the two
# ops registered alone in namespace _C_cache_ops as OUT/injected/vllm/_C_stable_libtorch.abi3.so, the name the
# adapter loads (`run --injected` points MLACHECK_VLLM_SRC at it).
#
# --from-source: the same library without the bugs (cache_ops_library DIR 0), in place of the wheel's
# 57 MB of xz: the two cache ops as the release's source has them, for a device whose carry cannot
# take the wheel's library beside the rest (the top-k adapters then have no library and are not run).
cache_ops_library() {  # DIR INJECT(0|1)
  local dir=$1 inject=$2
  local src="$cache/vllm-$version-sdist"
  [ -f "$src/csrc/libtorch_stable/cache_kernels.cu" ] ||
    die "--injected and --from-source need vLLM's source distribution at $src (bash scripts/upstream_guard.sh build unpacks it)"
  local py
  py=$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/mlacheck/pyenv-*/bin/python 2>/dev/null | head -1)
  [ -n "$py" ] || die "--injected: no mlacheck Python environment with torch (bash scripts/setup.sh)"
  local nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc} torch_dir stage
  [ -x "$nvcc" ] || die "--injected: no nvcc at $nvcc (set CUDACXX)"
  torch_dir=$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
  stage=$(mktemp -d)
  cp -r "$src/csrc" "$stage/csrc"
  local lib="$stage/csrc/libtorch_stable"
  if [ "$inject" = 1 ]; then
  grep -q "if (slot_idx < 0 || (head_dim_idx >= head_dim)) {" "$lib/cache_kernels.cu" ||
    die "--injected: cache_kernels.cu has no padding test to inject the bug into (another vLLM release?)"
  sed -i 's|if (slot_idx < 0 \|\| (head_dim_idx >= head_dim)) {|if (slot_idx < -1 \|\| (head_dim_idx >= head_dim)) {  // mlacheck: injected bug|' \
    "$lib/cache_kernels.cu"
  grep -q "mlacheck: injected bug" "$lib/cache_kernels.cu" || die "--injected: the bug was not injected"
  # The gather's second bug: the early return drops `batch < 0`, so a row past the last request
  # (num_tokens "may be an allocation upper bound", the kernel's own comment) is read as request -1
  # and written (docs/bugs.md G3's class).
  local gather_test="if (head_idx >= head_dim || token_idx >= num_tokens || batch < 0) {"
  grep -qF "$gather_test" "$lib/cache_kernels.cu" ||
    die "--injected: cache_kernels.cu has no gather row test to inject the bug into (another vLLM release?)"
  sed -i 's/if (head_idx >= head_dim || token_idx >= num_tokens || batch < 0) {/if (head_idx >= head_dim || token_idx >= num_tokens) {  \/\/ mlacheck: injected bug/' \
    "$lib/cache_kernels.cu"
  [ "$(grep -c "mlacheck: injected bug" "$lib/cache_kernels.cu")" = 2 ] || die "--injected: the gather's bug was not injected"
  fi
  local schemas
  schemas=$("$py" -c '
import re, sys
text = open(sys.argv[1]).read()
for op in ("indexer_k_quant_and_cache", "cp_gather_indexer_k_quant_cache"):
    m = re.search(r"ops\.def\(\s*((?:\"[^\"]*\"\s*)+)\);", text[text.index("\"%s(" % op) - 40:])
    print("  ops.def(%s);" % " ".join(m.group(1).split("\n")).strip())' "$lib/torch_bindings.cpp") ||
    die "--injected: no schema of indexer_k_quant_and_cache or cp_gather_indexer_k_quant_cache in torch_bindings.cpp"
  {
    echo "// Written by mlacheck's scripts/upstream.sh --injected: the indexer K-cache insert and gather alone, in _C_cache_ops."
    echo "#include <torch/csrc/stable/library.h>"
    echo "#include \"ops.h\""
    echo "STABLE_TORCH_LIBRARY_FRAGMENT(_C_cache_ops, ops) {"
    echo "$schemas"
    echo "}"
    echo "STABLE_TORCH_LIBRARY_IMPL(_C_cache_ops, CUDA, ops) {"
    echo "  ops.impl(\"indexer_k_quant_and_cache\", TORCH_BOX(&indexer_k_quant_and_cache));"
    echo "  ops.impl(\"cp_gather_indexer_k_quant_cache\", TORCH_BOX(&cp_gather_indexer_k_quant_cache));"
    echo "}"
  } > "$lib/mlacheck_insert_registration.cu"
  local flags=(-std=c++20 -O3 -lineinfo -gencode arch=compute_90a,code=sm_90a -Xcompiler -fPIC -Xcompiler -fvisibility=hidden
               --expt-relaxed-constexpr -DENABLE_FP8 -DUSE_CUDA -DTORCH_TARGET_VERSION=0x020B000000000000ULL
               -DTORCH_EXTENSION_NAME=_C_stable_libtorch -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include"
               -I"$stage/csrc" -I"$lib")
  echo "$me: compiling vLLM's cache_kernels.cu$([ "$inject" = 1 ] && echo " with the injected bugs") (sm_90a)"
  local u
  for u in cache_kernels mlacheck_insert_registration; do
    "$nvcc" "${flags[@]}" -c "$lib/$u.cu" -o "$stage/$u.o" > "$stage/$u.log" 2>&1 ||
      { tail -5 "$stage/$u.log" >&2; die "--injected: compiling $u.cu failed"; }
  done
  mkdir -p "$dir"
  # The driver library too (the file's swap_blocks_batch looks up a driver entry point).
  "$nvcc" "${flags[@]}" "$stage"/*.o -shared -cudart static -Xlinker --no-as-needed -L"$torch_dir/lib" -ltorch \
    -ltorch_cpu -ltorch_cuda -lc10 -L"$(dirname "$nvcc")/../lib64/stubs" -lcuda -o "$dir/_C_stable_libtorch.abi3.so"
  if [ "$inject" = 1 ]; then
    echo "vllm $version sdist, cache_kernels.cu with slot_idx < -1 in indexer_k_quant_and_cache_kernel and no batch < 0 in cp_gather_indexer_k_quant_cache_kernel's row test (injected)" > "$dir/REVISIONS"
  else
    touch "$dir/FROM_SOURCE"
  fi
  rm -rf "$stage"
}

build() {
  local out=$1
  [ -d "$out" ] || die "build: no folder $out (scripts/upstream.sh prepare makes it)"
  out=$(cd "$out" && pwd)
  if [ -f "$out/vllm/_C_stable_libtorch.abi3.so.xz" ] || [ -f "$out/vllm/FROM_SOURCE" ]; then
    mkdir -p "$out/vsrc/vllm/third_party/flashmla"
    if [ -f "$out/vllm/FROM_SOURCE" ]; then  # prepare --from-source: the cache ops alone, not xz-packed
      cp "$out/vllm/_C_stable_libtorch.abi3.so" "$out/vllm/FROM_SOURCE" "$out/vsrc/vllm/"
    else
      rm -f "$out/vsrc/vllm/FROM_SOURCE"
      [ -f "$out/vsrc/vllm/_C_stable_libtorch.abi3.so" ] && [ "$out/vsrc/vllm/_C_stable_libtorch.abi3.so" -nt "$out/vllm/_C_stable_libtorch.abi3.so.xz" ] ||
        python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
          "$out/vllm/_C_stable_libtorch.abi3.so.xz" "$out/vsrc/vllm/_C_stable_libtorch.abi3.so"
    fi
    mkdir -p "$out/vsrc/vllm/v1/attention/ops"
    cp "$out/vllm/_flashmla_C.abi3.so" "$out/vllm/_flashmla_extension_C.abi3.so" "$out/vsrc/vllm/"
    cp "$out/vllm/flash_mla_interface.py" "$out/vsrc/vllm/third_party/flashmla/"
    cp "$out/vllm/ops_flashmla.py" "$out/vsrc/vllm/v1/attention/ops/flashmla.py"
    echo "$me: vLLM's libraries in $out/vsrc/vllm"
  fi
  if [ -f "$out/deepgemm/src.tar.gz" ]; then
    local src="$out/deepgemm/src"
    [ -d "$src" ] || tar -xzf "$out/deepgemm/src.tar.gz" -C "$out/deepgemm"
    local cuda=${CUDA_HOME:-/usr/local/cuda}
    [ -f "$cuda/include/cuda.h" ] || die "build: no CUDA toolkit at $cuda (set CUDA_HOME)"
    local info
    info=$(python3 - <<'PY'
import shlex, sysconfig
import torch
from torch.utils import cpp_extension
q = shlex.quote
print("suffix=" + q(sysconfig.get_config_var("EXT_SUFFIX")))
print("pyinc=" + q(sysconfig.get_config_var("INCLUDEPY")))
print("abi=%d" % int(torch.compiled_with_cxx11_abi()))
print("tinc=(" + " ".join(q(p) for p in cpp_extension.include_paths(device_type="cuda")) + ")")
print("tlib=(" + " ".join(q(p) for p in cpp_extension.library_paths(device_type="cuda")) + ")")
PY
    ) || die "build: python3 has no torch to build DeepGEMM against"
    local suffix pyinc abi tinc tlib
    eval "$info"
    [ -f "$pyinc/Python.h" ] || die "build: no Python.h in $pyinc (python3's development headers)"
    local so="$src/deep_gemm/_C$suffix" s
    s=$(date +%s)
    if [ -f "$so" ] && [ "$so" -nt "$out/deepgemm/src.tar.gz" ] && [ -z "${DEEPGEMM_CXXFLAGS:-}" ]; then
      echo "$me: DeepGEMM already built: $so"  # a second build call (vLLM's libraries carried later)
    else
    echo "$me: compiling DeepGEMM's csrc/python_api.cpp (one unit, about a minute)"
    rm -f "$so"
    local rpath=() d
    for d in "${tlib[@]}" "$cuda/lib64"; do rpath+=("-Wl,-rpath,$d"); done
    ${CXX:-g++} -shared -fPIC -std=c++20 -O3 -g0 -Wno-psabi -Wno-deprecated-declarations \
      -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C -D_GLIBCXX_USE_CXX11_ABI="$abi" \
      -I"$pyinc" -I"$cuda/include" -I"$cuda/include/cccl" -I"$src/csrc" -I"$src/deep_gemm/include" \
      -I"$src/third-party/fmt/include" "${tinc[@]/#/-I}" "$src/csrc/python_api.cpp" \
      "${tlib[@]/#/-L}" -L"$cuda/lib64" -ltorch -ltorch_python -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda \
      -lcudart -lnvrtc -lcublasLt "${rpath[@]}" ${DEEPGEMM_CXXFLAGS:-} -o "$so.part" > "$out/deepgemm/build.log" 2>&1 ||
      { grep -m 5 -i "error" "$out/deepgemm/build.log" >&2 || true; die "build: DeepGEMM's compile failed ($out/deepgemm/build.log)"; }
    mv "$so.part" "$so"
    # Loaded into the GPU machine's python3 with torch 2.11, this build crashed on its first kernel
    # (a segmentation fault inside std::regex's constructor, in DeepGEMM's include parser,
    # csrc/jit/include_parser.hpp) unless the libstdc++ it was compiled against was loaded first;
    # with it preloaded the same build runs (docs/findings.md). `run` preloads the one named here.
    local libstdcxx
    libstdcxx=$(readlink -f "$(${CXX:-g++} -print-file-name=libstdc++.so.6)")
    if [ -f "$libstdcxx" ]; then echo "$libstdcxx" > "$out/deepgemm/libstdcxx"; else rm -f "$out/deepgemm/libstdcxx"; fi
    LD_PRELOAD="$(cat "$out/deepgemm/libstdcxx" 2>/dev/null)${LD_PRELOAD:+:$LD_PRELOAD}" PYTHONPATH="$src" python3 -c "import deep_gemm; deep_gemm.fp8_paged_mqa_logits; deep_gemm.get_paged_mqa_logits_metadata" ||
      die "build: the DeepGEMM just built does not import"
    echo "$me: DeepGEMM built in $(( $(date +%s) - s )) s: $so"
    fi
    if [ -d "$out/injected" ] && [ ! -d "$out/injected/deepgemm/src" ]; then
      # The injected copy: the sm90 kernel reads the second KV scale of each pair at the first
      # one's offset (a one-word slip in sm90_fp8_paged_mqa_logits.cuh), so every other token's
      # logit is scaled by its neighbour's scale. The header is compiled at run time: the same _C.
      mkdir -p "$out/injected/deepgemm"
      cp -r "$src" "$out/injected/deepgemm/src"
      [ ! -f "$out/deepgemm/libstdcxx" ] || cp "$out/deepgemm/libstdcxx" "$out/injected/deepgemm/"
      local kernel="$out/injected/deepgemm/src/deep_gemm/include/deep_gemm/impls/sm90_fp8_paged_mqa_logits.cuh"
      sed -i 's/\(float scale_kv_1 = ptx::ld_shared(smem_kv_scales\[kv_stage_idx\] + sub_warp_offset + \)v_1_offset);/\1v_0_offset);  \/\/ mlacheck: injected bug/' "$kernel"
      grep -q "mlacheck: injected bug" "$kernel" || die "build: the DeepGEMM bug was not injected (another revision?)"
      echo "$me: DeepGEMM with the injected bug in $out/injected/deepgemm/src"
    fi
  fi
}

# --injected, FlashMLA's dense decode: the release's own libraries beside copies of its Python
# interfaces with one realistic bug each (a wrapper that drops an argument on its way to the
# kernel): third_party/flashmla/flash_mla_interface.py's dense branch passes causal=False to
# dense_decode_fwd (a token of a multi-token step then sees the keys after it), and
# v1/attention/ops/flashmla.py's flash_mla_with_kvcache_fp8 passes descale_q where descale_k goes
# (K and V descaled by q's scale); and its sparse branch passes None where attn_sink goes to
# sparse_decode_fwd (a head's sink ignored: out not scaled by 1 / (1 + exp(sink - lse))). The
# adapters vllm_flashmla.dense_decode, .dense_decode_fp8 and .sparse_decode load them from
# OUT/injected/vllm (`run --injected`).
injected_flashmla() {
  local dir=$1 root="$cache/vllm-$version/vllm"
  mkdir -p "$dir/third_party/flashmla" "$dir/v1/attention/ops"
  cp "$root/_flashmla_C.abi3.so" "$root/_flashmla_extension_C.abi3.so" "$dir/"
  inject_line "$root/third_party/flashmla/flash_mla_interface.py" "$dir/third_party/flashmla/flash_mla_interface.py" \
    "            softmax_scale, causal," "            softmax_scale, False,  # mlacheck: injected bug"
  inject_line "$dir/third_party/flashmla/flash_mla_interface.py" "$dir/third_party/flashmla/flash_mla_interface.py" \
    "            q, k_cache, indices_in_kvcache, topk_length, attn_sink," \
    "            q, k_cache, indices_in_kvcache, topk_length, None,  # mlacheck: injected bug"
  inject_line "$root/v1/attention/ops/flashmla.py" "$dir/v1/attention/ops/flashmla.py" \
    "        descale_k," "        descale_q,  # mlacheck: injected bug"
  echo "vllm $version wheel, FlashMLA's interfaces: causal=False in the dense branch of flash_mla_with_kvcache, attn_sink None in its sparse branch, descale_q for descale_k in flash_mla_with_kvcache_fp8 (injected)" >> "$dir/REVISIONS"
}

# --injected, vLLM's compiled top-k: scripts/upstream_guard.sh build compiles the release's sampler.cu,
# topk.cu and cooperative_topk.cu from its sdist (the four top-k ops alone, namespace _C, sm_90a)
# with injected bugs, each build named as the wheel's library in a folder `run --injected` points
# MLACHECK_VLLM_SRC at, so that each adapter meets one bug on its path:
#   OUT/injected/topk (top_k_per_row_decode): the last row's block of topKPerRowDecode also stores
#     its first index one row past the end of the indices tensor (the guard's bug build);
#   OUT/injected/topk-prefill-cooperative (top_k_per_row_prefill, indexer_decode_topk):
#     topKPerRowPrefill reads its row's end as inclusive, and cooperative_topk's short-row path (the
#     decode step's top-k for at most 64 rows) takes index sl; persistent_topk, the decode step's
#     other path, is clean there;
#   OUT/injected/topk-persistent (persistent_topk): its short-row path pads with index 0, not -1.
injected_topk() {
  local dir=$1 g variant want=() lib
  for variant in bug bug-prefill-cooperative bug-persistent; do
    lib="$dir/$(topk_folder "$variant")/vllm/_C_stable_libtorch.abi3.so"
    [ -f "$lib" ] || want+=("$variant")
  done
  [ ${#want[@]} -gt 0 ] || return 0
  g=$(mktemp -d)
  MLACHECK_TOPK_VARIANTS="${want[*]}" bash scripts/upstream_guard.sh build "$g" | sed "s/^/$me: /" \
    || die "--injected: scripts/upstream_guard.sh build failed"
  for variant in "${want[@]}"; do
    lib="$dir/$(topk_folder "$variant")/vllm"
    mkdir -p "$lib"
    cp "$g/libvllm_topk_$variant.so" "$lib/_C_stable_libtorch.abi3.so"
    echo "vllm $version sdist, sampler.cu, topk.cu and cooperative_topk.cu with scripts/upstream_guard.sh's injected $variant (scripts/upstream.sh, injected_topk, says what it is)" > "$lib/REVISIONS"
  done
  rm -rf "$g"
}

topk_folder() {  # VARIANT: the folder under OUT/injected of upstream_guard.sh's build VARIANT
  case "$1" in bug) echo topk ;; *) echo "topk-${1#bug-}" ;; esac
}

topk_injected_src() {  # ADAPTER: the folder under OUT/injected holding its injected top-k library
  case "$1" in
    vllm_cuda.top_k_per_row_decode) topk_folder bug ;;
    vllm_cuda.top_k_per_row_prefill|vllm_cuda.indexer_decode_topk) topk_folder bug-prefill-cooperative ;;
    vllm_cuda.persistent_topk) topk_folder bug-persistent ;;
  esac
}

inject_line() {  # FROM TO OLD NEW: TO is FROM with the one line OLD (found exactly once) made NEW
  local n
  n=$(grep -cxF -- "$3" "$1" || true)
  [ "$n" = 1 ] || die "--injected: $1 has $n lines '$3', want 1 (another vLLM release?)"
  python3 - "$@" <<'PY'
import sys
src, dst, old, new = sys.argv[1:]
lines = open(src).read().split("\n")
open(dst, "w").write("\n".join(new if l == old else l for l in lines))
PY
}

run() {
  local out=$1; shift
  local budget=600 jobs=1 seed=1 picked=() injected=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --budget) [ $# -ge 2 ] || die "--budget takes seconds"; budget=$2; shift 2 ;;
      --jobs) [ $# -ge 2 ] || die "--jobs takes a count"; jobs=$2; shift 2 ;;
      --seed) [ $# -ge 2 ] || die "--seed takes a number"; seed=$2; shift 2 ;;
      --adapter) [ $# -ge 2 ] || die "--adapter takes a name"; picked+=("$2"); shift 2 ;;
      --injected) injected=1; shift ;;
      *) die "run: unknown argument '$1' (takes --budget S, --jobs N, --seed N, --adapter NAME, --injected)" ;;
    esac
  done
  [[ "$budget" =~ ^[0-9]+$ && "$budget" -ge 1 ]] || die "--budget '$budget' is not a whole number of seconds"
  [[ "$jobs" =~ ^[0-9]+$ && "$jobs" -ge 1 ]] || die "--jobs '$jobs' is not a count of 1 or more"
  [ -d "$out" ] || die "run: no folder $out"
  out=$(cd "$out" && pwd)
  local results="$out/results" fail_fast=()
  if [ "$injected" = 1 ]; then  # the copies with one bug each: vLLM's libraries and DeepGEMM from OUT/injected
    [ -d "$out/injected" ] || die "run --injected: no $out/injected (prepare --injected, then build)"
    mkdir -p "$out/injected/vsrc" && ln -sfn ../vllm "$out/injected/vsrc/vllm"
    out="$out/injected" results="$out/results-injected" fail_fast=(--fail-fast)
  fi
  local m=${MLACHECK:-}
  [ -n "$m" ] || m=$(command -v mlacheck 2>/dev/null || echo "$repo/build/default/tools/mlacheck")
  [ -x "$m" ] || die "run: no mlacheck at '$m' (set MLACHECK)"
  export MLACHECK_PYTHON=${MLACHECK_PYTHON:-python3}
  [ -d "$out/vsrc/vllm" ] && export MLACHECK_VLLM_SRC="$out/vsrc"
  [ -d "$out/sglang/sglang" ] && export MLACHECK_SGLANG_SRC="$out/sglang"
  if [ -f "$out/deepgemm/src/deep_gemm/__init__.py" ]; then
    export PYTHONPATH="$out/deepgemm/src${PYTHONPATH:+:$PYTHONPATH}" DG_JIT_CACHE_DIR="$out/deepgemm/jit-cache"
    if [ -s "$out/deepgemm/libstdcxx" ]; then  # the libstdc++ DeepGEMM was built against (see build)
      export LD_PRELOAD="$(cat "$out/deepgemm/libstdcxx")${LD_PRELOAD:+:$LD_PRELOAD}"
      echo "$me: LD_PRELOAD=$LD_PRELOAD (the libstdc++ DeepGEMM was built against)"
    fi
  fi
  if [ ${#picked[@]} -eq 0 ]; then  # every adapter of a compiled upstream kernel whose library is here
    local name
    while read -r name _; do
      case "$name" in
        vllm_cuda.indexer_k_quant_and_cache|vllm_cuda.cp_gather_indexer_k_quant_cache)
          [ -d "$out/vsrc/vllm" ] && picked+=("$name") ;;
        vllm_cuda.top_k_per_row_decode|vllm_cuda.top_k_per_row_prefill|vllm_cuda.persistent_topk|vllm_cuda.indexer_decode_topk)
          # the injected copies: upstream_guard.sh's bug builds (injected_topk)
          if [ "$injected" = 1 ]; then
            [ -f "$out/$(topk_injected_src "$name")/vllm/_C_stable_libtorch.abi3.so" ] && picked+=("$name")
          else
            [ -d "$out/vsrc/vllm" ] && [ ! -f "$out/vsrc/vllm/FROM_SOURCE" ] && picked+=("$name")
          fi ;;
        vllm_flashmla.*)  # the injected copy: the sink dropped (sparse), causal, descale_k (dense)
          [ -f "$out/vsrc/vllm/third_party/flashmla/flash_mla_interface.py" ] && picked+=("$name") ;;
        vllm_cuda.*) [ "$injected" = 0 ] && [ -d "$out/vsrc/vllm" ] && [ ! -f "$out/vsrc/vllm/FROM_SOURCE" ] && picked+=("$name") ;;
        deepgemm.*) [ -f "$out/deepgemm/src/deep_gemm/__init__.py" ] && picked+=("$name") ;;
        # the injected copy holds the sparse decode's bug only
        sglang_triton.sparse_decode) [ -d "$out/sglang/sglang" ] && picked+=("$name") ;;
        sglang_triton.*) [ "$injected" = 0 ] && [ -d "$out/sglang/sglang" ] && picked+=("$name") ;;
      esac
    done < <("$m" list | sed -n '/^adapters of upstream kernels/,/^$/p' | tail -n +2)
  fi
  [ ${#picked[@]} -gt 0 ] || die "run: no adapter's library in $out (scripts/upstream.sh build)"
  mkdir -p "$results"
  echo "$me: ${#picked[@]} adapter(s), ${budget} s each, $jobs at a time: ${picked[*]}"
  local a running=0 rcs="$results/.rcs"
  : > "$rcs"
  for a in "${picked[@]}"; do
    (
      rc=0
      [ "$injected" = 1 ] && [ -n "$(topk_injected_src "$a")" ] && export MLACHECK_VLLM_SRC="$out/$(topk_injected_src "$a")"
      timeout $((budget + 600)) "$m" check --backend cuda --adapter "$a" --budget "$budget" --seed "$seed" --format junit \
        "${fail_fast[@]}" --save "$results/$a-cases" > "$results/$a.xml" 2> "$results/$a.log" || rc=$?
      echo "$a $rc" >> "$rcs"
      echo "$me: $a: exit $rc ($(grep -c '<failure' "$results/$a.xml" || true) properties failed or unjudged)"
    ) &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
  done
  wait || true
  python3 - "$results" "${picked[@]}" <<'PY'
import os, sys, xml.etree.ElementTree as ET
res, names = sys.argv[1], sys.argv[2:]
rcs = dict(l.split() for l in open(os.path.join(res, ".rcs")) if l.strip())
rows = ["| adapter | exit | properties | cases | failing property: first failure |", "|---|---|---|---|---|"]
for n in names:
    path = os.path.join(res, n + ".xml")
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        log = open(os.path.join(res, n + ".log")).read().strip().splitlines()
        rows.append("| %s | %s | | | %s |" % (n, rcs.get(n, "?"), (log[-1] if log else "no output").replace("|", "/")))
        continue
    cases = sum(int(p.get("value")) for p in root.iter("property") if p.get("name") == "cases_run")
    fails = []
    for tc in root.iter("testcase"):
        for kind in ("failure", "error", "skipped"):
            f = tc.find(kind)
            if f is not None:
                fails.append("%s (%s): %s" % (tc.get("name"), kind, (f.get("message") or "").replace("|", "/")[:300]))
    rows.append("| %s | %s | %d | %d | %s |" % (n, rcs.get(n, "?"), len(list(root.iter("testcase"))), cases,
                                             "<br>".join(fails) or "none"))
open(os.path.join(res, "findings.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
  ! grep -qv " 0$" "$rcs"
}

[ $# -ge 2 ] || die "usage: scripts/upstream.sh prepare OUT [--deepgemm CHECKOUT] [--injected] [--from-source] | build OUT | run OUT [--budget S] [--jobs N] [--seed N] [--adapter NAME]... [--injected]"
cmd=$1; shift
case "$cmd" in
  prepare) prepare "$@" ;;
  build) build "$1" ;;
  run) run "$@" ;;
  *) die "unknown step '$cmd' (prepare, build or run)" ;;
esac
