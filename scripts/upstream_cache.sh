#!/usr/bin/env bash
# Downloads the pinned upstream releases of python/upstream.lock (vLLM 0.29.0's wheel, about 300 MB
# the first time; pip's cache serves later runs) and unpacks their Python sources into
# ~/.cache/mlacheck/upstream/vllm-<version> ($MLACHECK_UPSTREAM_CACHE moves it), for the adapters of
# python/mlacheck/adapters/ and ctest's `upstream` label (docs/upstream.md). Nothing of it enters
# the repository. Also makes vllm-<version>-bug beside it: the same tree with one injected bug (the
# uniform-decode kernel's store mask off by one), which the `upstream` tests must catch.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${MLACHECK_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlacheck/upstream}"
version=$(sed -n 's/^vllm==\([0-9.]*\).*/\1/p' python/upstream.lock)
root="$cache/vllm-$version"
pip=".venv/bin/pip"
[ -x "$pip" ] || pip="pip3"

if [ ! -f "$root/.mlacheck-complete" ]; then
  mkdir -p "$cache"
  echo "upstream: downloading vLLM $version's wheel (pinned by hash) into $cache"
  "$pip" download --quiet --disable-pip-version-check --no-deps --only-binary :all: --require-hashes \
    -r python/upstream.lock -d "$cache"
  wheel=$(ls "$cache"/vllm-"$version"-*.whl | head -1)
  rm -rf "$root" && mkdir -p "$root"
  # Only the Python sources: the adapters read vLLM's files, never its compiled extensions.
  python3 - "$wheel" "$root" <<'PY'
import sys, zipfile
wheel, root = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith("vllm/") and n.endswith(".py")]
    z.extractall(root, members=names)
print("upstream: unpacked %d Python files of %s" % (len(names), wheel.rsplit("/", 1)[-1]))
PY
  rm -f "$wheel"  # pip's cache keeps it
  touch "$root/.mlacheck-complete"
fi

# The injected bug: one comparison of the uniform-decode kernel's store mask, `<` made `<=`.
bug="$root-bug"
target=vllm/v1/attention/backends/mla/indexer.py
if [ ! -f "$bug/.mlacheck-complete" ]; then
  rm -rf "$bug" && mkdir -p "$bug"
  cp -r "$root/vllm" "$bug/"
  before=$(grep -c 'mask = off < expanded_bt_stride' "$bug/$target" || true)
  [ "$before" = 1 ] || { echo "upstream: $target has $before lines 'mask = off < expanded_bt_stride', want 1" >&2; exit 1; }
  sed -i 's/mask = off < expanded_bt_stride/mask = off <= expanded_bt_stride/' "$bug/$target"
  touch "$bug/.mlacheck-complete"
fi
echo "upstream: vLLM $version at $root; the injected-bug copy at $bug"
