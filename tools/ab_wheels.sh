#!/usr/bin/env bash
# On a GPU machine: a command under two builds of the Python package, in turns base, new, new, base (one process a
# turn, each build with its own kernel cache), so that a change's timing sits beside the build before it in one call.
# The new build is carry/wheels' wheel (installed by tools/device_torch.sh into /tmp/site), the base one the wheel in
# BASE_WHEEL_DIR (into /tmp/site_base); both get carry/peers. Each turn is headed "== base" or "== new".
# Usage: bash tools/ab_wheels.sh BASE_WHEEL_DIR COMMAND...
#   e.g. bash tools/ab_wheels.sh carry/base_wheel python3 tools/bench_quantize_t.py --rounds 3 --calls 10
# TURN_S: each turn's time limit (default 100 s).
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
base_dir=$1
shift
compgen -G "$base_dir/*.whl" >/dev/null || { echo "ab_wheels.sh: no wheel in $base_dir" >&2; exit 2; }
bash tools/device_torch.sh >/dev/null || exit 1
python3 -m pip install -q --no-deps --no-index --upgrade --target /tmp/site_base "$base_dir"/*.whl || exit 1
if compgen -G "carry/peers/*.whl" >/dev/null; then
  python3 -m pip install -q --no-deps --no-index --upgrade --target /tmp/site_base carry/peers/*.whl || exit 1
fi
status=0
for turn in base new new base; do
  site=/tmp/site
  [ "$turn" = base ] && site=/tmp/site_base
  echo "== $turn"
  PYTHONPATH=$site CODA_CACHE_DIR=/tmp/ab_cache_$turn PYTHONUNBUFFERED=1 timeout "${TURN_S:-100}" "$@" || status=1
done
exit $status
