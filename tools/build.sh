#!/usr/bin/env bash
# Builds coda into ./build (or $CODA_BUILD_DIR), installing the Debian/Ubuntu packages it needs when they
# are missing and we may install them (root, or sudo without a password). Used by the README's quick start
# and by CI.
# --tests: also what the Python tests need (below), as the README's test command asks.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${CODA_BUILD_DIR:-build}
tests=false
for arg in "$@"; do
  case "$arg" in
    --tests) tests=true ;;
    *) echo "usage: bash tools/build.sh [--tests]" >&2; exit 2 ;;
  esac
done

packages=(cmake g++ make libfmt-dev libspdlog-dev catch2 libcli11-dev python3-venv python3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -eq 0 ]; then sudo=(); elif sudo -n true 2>/dev/null; then sudo=(sudo -n); else
    echo "coda: please install: ${missing[*]}" >&2; exit 1
  fi
  echo "coda: installing ${missing[*]}" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The CUDA toolkit (NVRTC and headers) is expected under /usr/local/cuda unless CUDAToolkit_ROOT says otherwise.
if [ -z "${CUDAToolkit_ROOT:-}" ] && ! command -v nvcc >/dev/null && [ -d /usr/local/cuda ]; then
  export CUDAToolkit_ROOT=/usr/local/cuda
fi

# The Python package (build/python/coda, for PYTHONPATH and ctest's Python tests) needs nanobind to build; its tests
# need pytest and numpy, and torch and transformers for coda.torch's (the versions CI and the GPU machine have).
# $CODA_PYTHON (default python3) is used as it is, or with --tests where it lacks any of them, a virtual environment
# in the build directory that gets them from PyPI, once (Debian's own python3 refuses pip installs, PEP 668). Without
# nanobind the C++ build goes on alone, and ctest reports the Python tests as skipped, saying why.
test_packages=(nanobind pytest numpy torch==2.11.0 transformers==5.25.0)
has_all() { "$1" -c 'import nanobind, pytest, numpy, torch, transformers' 2>/dev/null; }
python_args=(-DCODA_BUILD_PYTHON=OFF)
if python=$(command -v "${CODA_PYTHON:-python3}"); then
  python=$("$python" -c 'import sys; print(sys.executable)')
  venv="$build_dir/venv"
  if $tests && ! has_all "$python" && { [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"; }; then
    if has_all "$venv/bin/python" || { echo "coda: installing ${test_packages[*]} into $venv" >&2 &&
                                         "$venv/bin/python" -m pip install -q "${test_packages[@]}"; }; then
      python=$(cd "$venv/bin" && pwd)/python
    else
      echo "coda: pip could not install ${test_packages[*]} into $venv: the Python tests will be skipped" >&2
    fi
  fi
  if ! "$python" -c 'import nanobind' 2>/dev/null; then
    echo "coda: nanobind is missing for $python: the Python package is not built (bash tools/build.sh --tests" \
         "makes a virtual environment with it)" >&2
  elif ! "$python" -c 'import os, sysconfig; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' 2>/dev/null; then
    echo "coda: no Python.h for $python (Debian: python3-dev): the Python package is not built" >&2
  else
    python_args=(-DCODA_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$python")
  fi
else
  echo "coda: no ${CODA_PYTHON:-python3} on PATH: the Python package is not built" >&2
fi

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${python_args[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
