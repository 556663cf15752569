#!/usr/bin/env bash
# Builds a wheel of the coda Python package for the device's Python 3.12 (cp312, stripped) into carry/wheels, small
# enough to travel with the device tool. On the device:
#   python3 -m pip install -q --no-deps --no-index --target /tmp/site carry/wheels/*.whl && PYTHONPATH=/tmp/site ...
# The interpreter: $CODA_PYTHON312, else pyenv's 3.12.1, else python3.12. Its nanobind and scikit-build-core are used
# when installed (no download), else pip fetches them.
#
# --peers also downloads the benchmarks' peers into carry/peers, as binary wheels for the device (cp312, manylinux
# x86_64), which has no network: liger-kernel and torchao without their dependencies (torch and triton). The device
# image has transformers (5.17) already; CODA_PEER_TRANSFORMERS=1 carries this machine's choice too, with the
# dependencies pip resolves for it (33 MB; it then shadows the image's copy). tools/device_torch.sh installs them
# beside the coda wheel. --peers-only: the peers alone, no coda wheel. carry/ travels with a 64 MiB cap in all: the
# sizes are printed.
# Usage: bash tools/pack_device_python.sh [--peers | --peers-only]
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=1 peers=0
for arg in "$@"; do
  case $arg in
    --peers) peers=1 ;;
    --peers-only) peers=1 wheel=0 ;;
    *) echo "pack_device_python: unknown option '$arg' (--peers, --peers-only)" >&2; exit 2 ;;
  esac
done
python=${CODA_PYTHON312:-}
[ -n "$python" ] || python=$(PYENV_VERSION=3.12.1 pyenv which python 2>/dev/null) || python=$(command -v python3.12) || {
  echo "pack_device_python: no Python 3.12 (set CODA_PYTHON312)" >&2; exit 1; }

if ((wheel)); then
  isolation=()
  "$python" -c 'import nanobind, scikit_build_core' 2>/dev/null && isolation=(--no-build-isolation)
  launcher=()
  command -v ccache >/dev/null && launcher=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
  rm -rf carry/wheels && mkdir -p carry/wheels
  "$python" -m pip wheel . --no-deps -q -w carry/wheels "${isolation[@]}" "${launcher[@]}" \
    --config-settings=install.strip=true
  ls -l carry/wheels
fi

if ((peers)); then
  rm -rf carry/peers && mkdir -p carry/peers
  # manylinux_2_28 too: some projects (numpy, torchao) publish no manylinux2014 wheel for 3.12 any more.
  device=(--python-version 3.12 --implementation cp --abi cp312 --only-binary=:all:
          --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64)
  if [ "${CODA_PEER_TRANSFORMERS:-0}" = 1 ]; then
    "$python" -m pip download -q -d carry/peers "${device[@]}" transformers
  fi
  "$python" -m pip download -q -d carry/peers "${device[@]}" --no-deps liger-kernel torchao
  # Left out, as the device has them and a carried copy would shadow its own (device_torch.sh puts carry's site
  # first on PYTHONPATH): torch's own dependencies filelock and fsspec (torch's inductor locks its caches with
  # filelock), and numpy (16 MB; on the device image, which builds its packages against it). hf-xet only speeds up
  # downloads from the Hub, which the device cannot reach (4 MB).
  for name in filelock fsspec numpy hf_xet; do rm -f carry/peers/"$name"-*.whl; done
  ls -l carry/peers
  du -sh carry/peers; du -sh carry
fi
