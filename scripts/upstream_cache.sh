#!/usr/bin/env bash
# Downloads the pinned upstream releases of python/upstream.lock (vLLM 0.29.0's wheel, about 300 MB
# the first time; pip's cache serves later runs) and unpacks their Python sources into
# ~/.cache/mlacheck/upstream/vllm-<version> ($MLACHECK_UPSTREAM_CACHE moves it), for the adapters of
# python/mlacheck/adapters/ and ctest's `upstream` label (docs/upstream.md). Nothing of it enters
# the repository. Also makes copies beside it, each the same tree with one injected bug (below),
# which the `upstream` tests must catch.
#
#   scripts/upstream_cache.sh [--compiled]
#
# --compiled  also unpacks two of the release's compiled libraries beside the sources, for a GPU
#             machine: vllm/_C_stable_libtorch.abi3.so (81 MB; the top-k kernels of
#             python/mlacheck/adapters/vllm_cuda.py) and vllm/_flashmla_C.abi3.so (1.8 MB;
#             FlashMLA's decode, python/mlacheck/adapters/vllm_flashmla.py), and
#             vllm/_flashmla_extension_C.abi3.so (0.2 MB; FlashMLA's fp8 dense decode, the same file).
set -euo pipefail
cd "$(dirname "$0")/.."
compiled=0
for a in "$@"; do
  case "$a" in
    --compiled) compiled=1 ;;
    *) echo "upstream_cache: unknown argument '$a' (takes --compiled)" >&2; exit 2 ;;
  esac
done
cache="${MLACHECK_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlacheck/upstream}"
version=$(sed -n 's/^vllm==\([0-9.]*\).*/\1/p' python/upstream.lock)
root="$cache/vllm-$version"
pip=".venv/bin/pip"
[ -x "$pip" ] || pip="pip3"
# One project's pin and hashes from the lock, as a requirements file of its own.
pin_of() {  # NAME FILE
  python3 - "$1" python/upstream.lock > "$2" <<'PY'
import sys
name, lines = sys.argv[1], open(sys.argv[2]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith(name + "==")]
if not start:
    sys.exit("upstream: python/upstream.lock pins no %s" % name)
i = start[0]
out = [lines[i]]
while out[-1].rstrip().endswith("\\") and i + 1 < len(lines):  # a continued line
    i += 1
    out.append(lines[i])
print("\n".join(out))
PY
}
vllm_pin=$(mktemp)
pin_of vllm "$vllm_pin"
trap 'rm -f "$vllm_pin"' EXIT

# A release's Python files under PREFIX (nothing compiled), from its wheel pinned by hash in the
# lock, into ROOT; pip's cache keeps the wheel for the next time.
unpack_release() {  # NAME VERSION ROOT PREFIX
  local name=$1 version=$2 root=$3 prefix=$4 pin wheel
  [ -f "$root/.mlacheck-complete" ] && return 0
  mkdir -p "$cache"
  pin=$(mktemp)
  pin_of "$name" "$pin"
  echo "upstream: downloading $name $version's wheel (pinned by hash) into $cache"
  "$pip" download --quiet --disable-pip-version-check --no-deps --only-binary :all: --require-hashes \
    -r "$pin" -d "$cache"
  rm -f "$pin"
  wheel=$(ls "$cache/$name-$version"-*.whl | head -1)
  rm -rf "$root" && mkdir -p "$root"
  python3 - "$wheel" "$root" "$prefix" <<'PY'
import sys, zipfile
wheel, root, prefix = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and n.endswith(".py")]
    z.extractall(root, members=names)
print("upstream: unpacked %d Python files of %s" % (len(names), wheel.rsplit("/", 1)[-1]))
PY
  rm -f "$wheel"
  touch "$root/.mlacheck-complete"
}
# vLLM: every Python file (about 300 MB of wheel the first time); the adapters read vLLM's files.
unpack_release vllm "$version" "$root" vllm/

if [ "$compiled" = 1 ] && { [ ! -f "$root/vllm/_C_stable_libtorch.abi3.so" ] || [ ! -f "$root/vllm/_flashmla_C.abi3.so" ] ||
                             [ ! -f "$root/vllm/_flashmla_extension_C.abi3.so" ]; }; then
  tmp=$(mktemp -d)
  "$pip" download --quiet --disable-pip-version-check --no-deps --only-binary :all: --require-hashes \
    -r "$vllm_pin" -d "$tmp"
  python3 - "$(ls "$tmp"/vllm-"$version"-*.whl | head -1)" "$root" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for lib in ("vllm/_C_stable_libtorch.abi3.so", "vllm/_flashmla_C.abi3.so", "vllm/_flashmla_extension_C.abi3.so"):
        z.extract(lib, sys.argv[2])
        print("upstream: unpacked " + lib)
PY
  rm -rf "$tmp"
fi

# The injected bugs, one per copy of the tree (vllm-<version>-<name>): each copy must be caught by
# the `upstream` tests within 20 cases.
inject() {  # NAME FILE OLD NEW: the copy's one change, OLD found exactly once
  local copy="$root-$1" file="$2" old="$3" new="$4"
  [ -f "$copy/.mlacheck-complete" ] && return 0
  rm -rf "$copy" && mkdir -p "$copy"
  cp -r "$root"/. "$copy/" && rm -f "$copy/.mlacheck-complete"
  local before
  before=$(grep -cF "$old" "$copy/$file" || true)
  [ "$before" = 1 ] || { echo "upstream: $file has $before lines '$old', want 1" >&2; exit 1; }
  OLD="$old" NEW="$new" python3 -c 'import os, sys; p = sys.argv[1]; s = open(p).read(); open(p, "w").write(s.replace(os.environ["OLD"], os.environ["NEW"]))' "$copy/$file"
  touch "$copy/.mlacheck-complete"
}
# The uniform-decode metadata kernel's store mask, `<` made `<=`.
inject bug vllm/v1/attention/backends/mla/indexer.py 'mask = off < expanded_bt_stride' 'mask = off <= expanded_bt_stride'
# The grouped MLA decode kernel's key mask on the scores: one key past the split's end takes part.
inject bug-mla vllm/v1/attention/ops/triton_decode_attention.py \
  'mask_h[:, None] & (offs_n[None, :] < split_kv_end), qk, float("-inf")' \
  'mask_h[:, None] & (offs_n[None, :] <= split_kv_end), qk, float("-inf")'
# ROCm's K-cache gather takes the block table's width for its row stride (what vLLM's CUDA gather
# kernel does, docs/bugs.md G1): every request after the first reads another request's blocks when
# the table is a view into a wider one.
inject bug-gather vllm/v1/attention/ops/rocm_aiter_mla_sparse.py \
  'block_table_stride = block_table.stride(0)' 'block_table_stride = block_table.shape[1]'
# The decode query packer and unpacker take a request's first row as if every request before it were
# as long as this one (the non-uniform decode lengths class, docs/bugs.md U1): wrong rows for every
# request after the first when lengths differ.
inject bug-pack vllm/v1/attention/ops/common.py '    in_row = in_start + off_t' '    in_row = pid_b * seq_len + off_t'
inject bug-unpack vllm/v1/attention/ops/common.py '    out_row = in_start + off_t' '    out_row = pid_b * seq_len + off_t'
# The global-index conversion's block-table guard without its upper bound: an index past the
# request's table row reads the next row's block (docs/bugs.md O2's class).
inject bug-global vllm/v1/attention/backends/mla/sparse_utils.py \
  '    valid_block = (block_id < max_num_blocks_per_req) & (block_id >= 0)' '    valid_block = block_id >= 0'
# ROCm's K-cache insert does not skip a padding token (slot -1): the same bug as the CUDA insert's
# injected copy (scripts/upstream.sh --injected), its codes and scale written before block 0.
inject bug-insert vllm/v1/attention/ops/rocm_aiter_mla_sparse.py '    if slot_id < 0:' '    if slot_id < -1:'
# ROCm's own global-index conversion taking the offset in a block as if the block size were a power
# of two (`tok % BLOCK_SIZE` made `tok & (BLOCK_SIZE - 1)`): wrong slots for any other block size.
inject bug-global-rocm vllm/v1/attention/backends/mla/rocm_aiter_mla_sparse.py \
  '    inblock_off = tok % BLOCK_SIZE' '    inblock_off = tok & (BLOCK_SIZE - 1)'
# The metadata builder's native branch without its clamp at 0 (the bug vLLM's #51538 fixed): a
# padding request's first token gets context length -1.
inject bug-native vllm/v1/attention/backends/mla/indexer.py '                ).clamp_(min=0)' '                )'
echo "upstream: vLLM $version at $root; the injected-bug copies at $root-bug, $root-bug-mla, $root-bug-gather, $root-bug-pack, $root-bug-unpack, $root-bug-global, $root-bug-insert, $root-bug-native and $root-bug-global-rocm"

# SGLang: the Python files of its DSA kernels (sglang/kernels/ops/attention/dsa/), and copies with
# one injected bug each: first the tiled decode index transform takes index 0 for "no index" (`>= 0` made `> 0`).
sversion=$(sed -n 's/^sglang==\([0-9.]*\).*/\1/p' python/upstream.lock)
sroot="$cache/sglang-$sversion"
unpack_release sglang "$sversion" "$sroot" sglang/kernels/ops/attention/dsa/
root="$sroot"
inject bug sglang/kernels/ops/attention/dsa/transform_index.py \
  'selected = in_row & (loaded_topk_indices >= 0)' 'selected = in_row & (loaded_topk_indices > 0)'
# And the 2048-wide kernel (transform_index_page_table_decode_kernel) with the same `>= 0` made `> 0`.
inject bug-2048 sglang/kernels/ops/attention/dsa/transform_index.py \
  '    mask = loaded_topk_indices >= 0' '    mask = loaded_topk_indices > 0'
# And the sparse MLA decode's fused kernel (_sparse_mla_fused_kernel) with its row's end inclusive:
# each query token also takes the entry one past its top-k row (the next token's first).
inject bug-sparse sglang/kernels/ops/attention/dsa/triton_sparse_mla.py \
  '        valid = k_pos < valid_topk' '        valid = k_pos <= valid_topk'
echo "upstream: SGLang $sversion at $sroot; the injected-bug copies at $sroot-bug, $sroot-bug-2048 and $sroot-bug-sparse"
