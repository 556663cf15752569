#!/usr/bin/env bash
# Builds coda into ./build (or $CODA_BUILD_DIR), installing the Debian/Ubuntu packages it needs when they
# are missing and we may install them (root, or sudo without a password). Used by the README's quick start
# and by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${CODA_BUILD_DIR:-build}

packages=(cmake g++ make libfmt-dev libspdlog-dev catch2 libcli11-dev)
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

# The Python package (build/python/coda, for PYTHONPATH and ctest's Python tests) when nanobind is importable by
# $CODA_PYTHON (default python3): pip installs nanobind when it is missing and may; else the C++ build goes on alone.
python_args=(-DCODA_BUILD_PYTHON=OFF)
if python=$(command -v "${CODA_PYTHON:-python3}"); then
  python=$("$python" -c 'import sys; print(sys.executable)')
  if ! "$python" -c 'import nanobind' 2>/dev/null && ! "$python" -m pip install -q nanobind >/dev/null 2>&1; then
    echo "coda: nanobind is missing for $python and pip could not install it: the Python package is not built" \
         "(pip install nanobind, or use a virtual environment)" >&2
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
