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
  # One kernel per operand layout (and dtype), for each Hopper schedule: `coda demo --layouts`.
  echo "== compute-sanitizer memcheck and racecheck over coda demo --layouts (both schedules, with and without clusters)"
  for config in "hopper bm=128 bn=256 bk=64 stages=4 cooperative cluster=1" \
                "hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1" \
                "hopper bm=128 bn=256 bk=64 stages=4 cooperative cluster=2" \
                "hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=2"; do
    tag=$(echo "$config" | awk '{print $6 "_" $7}' | tr -d =)
    for tool in memcheck racecheck; do
      timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/coda" demo --layouts --config "$config" \
        > "$out/sanitizer_${tool}_$tag.log" 2>&1 || status=1
      echo "$tool $tag: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^OK|FAILED" "$out/sanitizer_${tool}_$tag.log" | tail -n 2 | tr '\n' ' ')"
    done
  done
fi

echo "== coda bench jit"
# CUDA_CACHE_DISABLE=1: a cold compile must not be served by the driver's compute cache.
CUDA_CACHE_DISABLE=1 "$build/coda" bench jit 2>&1 | tee "$out/bench_jit.log" || status=1

# The GEMM shape set with its torch baselines; the table lands in $out/gemm_table.md.
OUT=$out bash tools/bench_gemm.sh "$build" || status=1

echo "== coda bench tile, 16384 x 4096 bf16, and its baseline (torch_copy)"
"$build/coda" bench tile --m 16384 --n 4096 2>&1 | tee "$out/bench_tile.log" || status=1
python3 tools/bench_torch.py --shapes none --copy 2>&1 | tee -a "$out/bench_tile.log" || status=1
exit $status
