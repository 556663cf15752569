#!/usr/bin/env bash
# Builds a wheel of the coda Python package for the device's Python 3.12 (cp312, stripped) into carry/wheels, small
# enough to travel with the device tool. On the device:
#   python3 -m pip install -q --no-deps --no-index --target /tmp/site carry/wheels/*.whl && PYTHONPATH=/tmp/site ...
# The interpreter: $CODA_PYTHON312, else pyenv's 3.12.1, else python3.12. Its nanobind and scikit-build-core are used
# when installed (no download), else pip fetches them.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${CODA_PYTHON312:-}
[ -n "$python" ] || python=$(PYENV_VERSION=3.12.1 pyenv which python 2>/dev/null) || python=$(command -v python3.12) || {
  echo "pack_device_python: no Python 3.12 (set CODA_PYTHON312)" >&2; exit 1; }
isolation=()
"$python" -c 'import nanobind, scikit_build_core' 2>/dev/null && isolation=(--no-build-isolation)
launcher=()
command -v ccache >/dev/null && launcher=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
rm -rf carry/wheels && mkdir -p carry/wheels
"$python" -m pip wheel . --no-deps -q -w carry/wheels "${isolation[@]}" "${launcher[@]}" \
  --config-settings=install.strip=true
ls -l carry/wheels
