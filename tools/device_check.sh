#!/usr/bin/env bash
# On a GPU machine with a build of coda: the whole test suite (GPU tests included), the demo, and the
# benchmarks with their torch baselines measured in the same run. Logs go to $OUT (default ./device-logs).
# Usage: bash tools/device_check.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${OUT:-device-logs}
mkdir -p "$out"
export CODA_CACHE_DIR=${CODA_CACHE_DIR:-$(mktemp -d)}
status=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$out/gpu.txt"

echo "== tests (ctest, GPU tests included)"
# The install test needs the full build tree (tools/pack_device_build.sh carries only binaries); CI runs it.
exclude=()
[ -f "$build/cmake_install.cmake" ] || exclude=(-E '^install_and_find_package$')
(cd "$build" && ctest --output-on-failure -j 4 "${exclude[@]}") > "$out/ctest.log" 2>&1 || status=1
tail -n 25 "$out/ctest.log"

echo "== coda demo"
"$build/coda" demo > "$out/demo.log" 2>&1 || status=1
grep -E "PASS|FAIL|OK|FAILED" "$out/demo.log" | grep -v "^  " | tail -n 14

if [ "${CODA_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck and racecheck over coda demo"
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/coda" demo > "$out/sanitizer_$tool.log" 2>&1 \
      || status=1
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^OK|FAILED" "$out/sanitizer_$tool.log" | tail -n 3
  done
fi

echo "== coda bench jit"
# CUDA_CACHE_DISABLE=1: a cold compile must not be served by the driver's compute cache.
CUDA_CACHE_DISABLE=1 "$build/coda" bench jit 2>&1 | tee "$out/bench_jit.log" || status=1

echo "== coda bench gemm + torch baselines, 4096^3 bf16"
"$build/coda" bench gemm --m 4096 --n 4096 --k 4096 2>&1 | tee "$out/bench_gemm.log" || status=1
python3 tools/bench_torch.py --m 4096 --n 4096 --k 4096 --chain --copy 2>&1 | tee -a "$out/bench_gemm.log" || status=1

echo "== coda bench tile (16384 x 4096 bf16; the torch_copy line above is its baseline)"
"$build/coda" bench tile --m 16384 --n 4096 2>&1 | tee "$out/bench_tile.log" || status=1
exit $status
