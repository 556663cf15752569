#!/usr/bin/env bash
# Copies what a device run needs from build/ (binaries, stripped, and ctest's files) into carry/build, small
# enough to travel with the device tool. The device side links it back to build/ (see tools/device_check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf carry/build && mkdir -p carry/build/tests
cp build/CTestTestfile.cmake carry/build/
cp build/tests/CTestTestfile.cmake build/tests/*-b*.cmake carry/build/tests/
for bin in coda tests/coda_tests tests/coda_gpu_tests; do
  strip -o "carry/build/$bin" "build/$bin"
done
du -sh carry/build
