#!/usr/bin/env bash
# Makes mlacheck's Python environment from PyPI (docs/python.md, "The Python environment"): a venv
# of Debian 12's /usr/bin/python3 with torch 2.11, Triton 3.6, numpy, pytest and pytest-xdist from
# python/requirements.lock, pinned with hashes. scripts/setup.sh runs it.
#
# The venv lives in a cache folder named after the lock's hash, so a fresh clone on the same machine
# (a second CI run) installs nothing: $MLACHECK_PYENV, else ~/.cache/mlacheck/pyenv-<hash>. The
# repository's git-ignored .venv links to it; CMake bakes its path into mlacheck as the default
# interpreter of --python ($MLACHECK_PYTHON, or an active virtualenv or conda env, comes first).
#
# Never patches an installed package: a combination that breaks is a new lock, and
# tests/python/test_env.py (ctest python.env) fails when it does.
set -euo pipefail
cd "$(dirname "$0")/.."
lock=python/requirements.lock
hash=$(sha256sum "$lock" | cut -c1-12)
env_dir="${MLACHECK_PYENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mlacheck/pyenv-$hash}"
base=/usr/bin/python3
# --path: where the environment is (or will be), without making it: scripts/main.sh configures its
# build with this interpreter while the environment is still being made.
if [ "${1:-}" = --path ]; then echo "$env_dir/bin/python"; exit 0; fi
[ $# -eq 0 ] || { echo "pyenv: unknown argument '$1' (usage: scripts/pyenv.sh [--path])" >&2; exit 2; }

if [ -f "$env_dir/.mlacheck-complete" ] && [ -x "$env_dir/bin/python" ]; then
  ln -sfn "$env_dir" .venv
  echo "pyenv: ready, nothing to install ($env_dir: $(cat "$env_dir/.mlacheck-complete"))"
  exit 0
fi

[ -x "$base" ] || { echo "pyenv: $base is missing (Debian's python3; scripts/setup.sh installs it)" >&2; exit 1; }
started=$(date +%s)
echo "pyenv: making $env_dir from $lock (about 0.9 GB from PyPI the first time; pip's cache serves later ones)"
rm -rf "$env_dir"
mkdir -p "$(dirname "$env_dir")"
if [ -z "${MLACHECK_PYENV:-}" ]; then  # environments of older locks: 2 GB each
  find "$(dirname "$env_dir")" -maxdepth 1 -name 'pyenv-*' ! -name "$(basename "$env_dir")" -exec rm -rf {} +
fi
"$base" -m venv "$env_dir"
if ! "$env_dir/bin/pip" install --quiet --disable-pip-version-check --no-deps --require-hashes \
      --only-binary :all: -r "$lock"; then
  echo "pyenv: pip could not install $lock (is PyPI reachable?)" >&2
  exit 1
fi
# torch's CUDA libraries come from the image's CUDA 13 runtime (the lock's header says why): say so
# in one line when this machine lacks one, rather than a traceback at the first test.
if ! err=$("$env_dir/bin/python" -c 'import torch, triton, numpy' 2>&1); then
  echo "pyenv: the new environment cannot import torch: $(echo "$err" | tail -1)" \
       "(torch's CUDA 13 libraries are expected from the CUDA toolkit at /usr/local/cuda, on the loader's path)" >&2
  exit 1
fi
versions=$("$env_dir/bin/python" -c 'import torch, triton, numpy; print("torch %s, Triton %s, numpy %s" % (torch.__version__, triton.__version__, numpy.__version__))')
echo "$versions" > "$env_dir/.mlacheck-complete"
ln -sfn "$env_dir" .venv
echo "pyenv: made in $(( $(date +%s) - started )) s: $versions; .venv -> $env_dir"
