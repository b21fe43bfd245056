#!/usr/bin/env bash
# Installs the Debian packages mlacheck builds with, idempotently (`apt-get update` runs only when a
# package is missing), then mlacheck's Python environment from PyPI (scripts/pyenv.sh: torch 2.11,
# Triton 3.6, pytest, pinned with hashes in python/requirements.lock). Nothing else is downloaded.
#
# The CUDA toolkit is not a Debian package here: CUDA builds use /usr/local/cuda when present.
#
#   scripts/setup.sh [--no-python]   --no-python: the packages only (scripts/main.sh makes the Python
#                                    environment beside its build: scripts/pyenv.sh)
set -euo pipefail
python_env=1
case "${1:-}" in
  "") ;;
  --no-python) python_env=0 ;;
  *) echo "setup: unknown argument '$1' (usage: scripts/setup.sh [--no-python])" >&2; exit 2 ;;
esac
# Then the Python environment, unless --no-python.
python_step() {
  [ $python_env -eq 1 ] || exit 0
  exec bash "$(dirname "$0")/pyenv.sh"
}

packages=(
  cmake ninja-build g++ ccache     # the builds (g++: nvcc's host compiler, the GPU bundle; ccache: a second build compiles nothing again)
  clang-14 libclang-rt-14-dev      # the default and sanitizer builds, libFuzzer
  libeigen3-dev                    # the oracle
  librapidcheck-dev                # properties
  libgtest-dev libgmock-dev        # tests
  libboost-context-dev             # fibers of the host SIMT backend
  hipcc rocm-device-libs libamdhip64-dev  # HIP compile checks (gfx90a, gfx940)
  chromium zlib1g-dev               # --report html's browser test (a headless screenshot)
  python3 python3-venv python3-pip python3-setuptools  # the base of the Python environment (scripts/pyenv.sh)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  python_step
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: installed ${#missing[@]} packages"
python_step
