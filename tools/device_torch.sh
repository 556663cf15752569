#!/usr/bin/env bash
# On a GPU machine, with the cp312 wheel from tools/pack_device_python.sh in carry/wheels: installs it into
# /tmp/site (with the benchmarks' peers from carry/peers when `pack_device_python.sh --peers` put them there), then
# runs what is asked, logging to $OUT (default ./device-logs):
#   tests    every Python test marked gpu (coda.torch, its training machinery, the bindings) with pytest
#   profile  tools/profile_block.py (PROFILE_ARGS, default: d = 2048, both attentions, and the model step)
#   bench    tools/bench_block.py (BENCH_ARGS)
# PYTEST_ARGS: more pytest arguments for `tests` (e.g. "-k llama3"). CODA_OVERLAY=1: see below.
# Usage: bash tools/device_torch.sh tests profile bench
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-logs}
mkdir -p "$out"
export CODA_CACHE_DIR=${CODA_CACHE_DIR:-$(mktemp -d)} PYTHONUNBUFFERED=1
# --upgrade: a warm machine keeps /tmp/site between calls, and pip --target skips a package already there.
python3 -m pip install -q --no-deps --no-index --upgrade --target /tmp/site carry/wheels/*.whl || exit 1
if compgen -G "carry/peers/*.whl" >/dev/null; then
  python3 -m pip install -q --no-deps --no-index --upgrade --target /tmp/site carry/peers/*.whl || exit 1
fi
# CODA_OVERLAY=1: the working tree's coda.torch Python files over the wheel's, for a change to them alone (the
# extension stays the wheel's, so the bindings must be those it was built with).
if [ "${CODA_OVERLAY:-0}" = 1 ]; then
  cp src/python/coda/torch/*.py /tmp/site/coda/torch/ || exit 1
fi
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
status=0
for what in "$@"; do
  case $what in
    tests)
      echo "== Python GPU tests"
      # shellcheck disable=SC2086
      (cd /tmp && python3 -m pytest "$OLDPWD/tests/python" -m gpu -q -p no:cacheprovider -rs -s \
        ${PYTEST_ARGS:-}) > "$out/pytest_gpu.log" 2>&1 || status=1
      grep -E "passed|failed|PASSED|FAILED|Error" "$out/pytest_gpu.log" | tail -n 30 ;;
    profile)
      echo "== tools/profile_block.py ${PROFILE_ARGS:---d 2048 --model}"
      # shellcheck disable=SC2086
      python3 tools/profile_block.py --out "$out" ${PROFILE_ARGS:---d 2048 --model} > "$out/profile.log" 2>&1 || status=1
      tail -n 5 "$out/profile.log" ;;
    bench)
      echo "== tools/bench_block.py ${BENCH_ARGS:-}"
      # shellcheck disable=SC2086
      python3 tools/bench_block.py --out "$out" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" | grep -v "^\[" ;;
    *) echo "device_torch.sh: unknown step '$what' (tests, profile, bench)" >&2; exit 2 ;;
  esac
done
exit $status
