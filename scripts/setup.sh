#!/usr/bin/env bash
# Installs the Debian packages mlacheck builds with, idempotently: nothing is downloaded from
# anywhere but Debian, and `apt-get update` runs only when a package is missing.
#
# The CUDA toolkit is not a Debian package here: CUDA builds use /usr/local/cuda when present.
set -euo pipefail

packages=(
  cmake ninja-build g++            # the default host build
  clang-14 libclang-rt-14-dev      # the sanitizer build and libFuzzer
  libeigen3-dev                    # the oracle
  librapidcheck-dev                # properties
  libgtest-dev libgmock-dev        # tests
  libboost-context-dev             # fibers of the host SIMT backend
  hipcc rocm-device-libs libamdhip64-dev  # HIP compile checks (gfx90a, gfx940)
  chromium zlib1g-dev               # --report html's browser test (a headless screenshot)
  python3-torch python3-pytest python3-pytest-xdist python3-pip python3-setuptools  # --python (docs/python.md): torch for the examples and tests, pytest for the package
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
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
