#!/usr/bin/env bash
# On a GPU machine with a build of coda: every C++ GPU test case as its own process, several at once. One after
# another they take well over a device call's 10 minutes; six at once, 36 cases took 260 s on an H100 with 16 cores
# (the longest case alone: the random GEMM epilogues, 258 s). The processes share the kernel cache ($CODA_CACHE_DIR;
# it publishes atomically) and the GPU, so this is for correctness, not timing. Logs: $OUT/gpu_suite/<n>.log, one line per case in
# summary.txt (exit status, seconds, Catch2's count). Exits 1 when a case failed or timed out, 77 when every case
# skipped (no GPU).
# Usage: bash tools/gpu_suite.sh [BUILD_DIR] ; JOBS (default 6), CASE_S (each case's limit, default 450 s), CASES (an
# extended regular expression: only the cases whose name matches it).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${OUT:-device-logs}/gpu_suite
mkdir -p "$out"
rm -f "$out/summary.txt"
"$build/tests/coda_gpu_tests" --list-test-names-only 2>/dev/null | grep -v -e '^$' -e '^SKIPPED' |
  grep -E -- "${CASES:-.}" > "$out/names.txt"
run_case() {  # INDEX: the case on line INDEX of names.txt (commas and brackets escaped for Catch2's test spec)
  local name spec start rc
  name=$(sed -n "$1p" "$out/names.txt")
  spec=$(printf '%s' "$name" | sed 's/,/\\,/g; s/\[/\\[/g')
  start=$(date +%s)
  timeout "${CASE_S:-450}" "$build/tests/coda_gpu_tests" "$spec" > "$out/$1.log" 2>&1
  rc=$?
  echo "$1 rc=$rc $(($(date +%s) - start))s $(grep -E 'test cases?:|All tests passed' "$out/$1.log" | tail -n 1) :: $name" \
    >> "$out/summary.txt"
}
export -f run_case
export build out
seq "$(wc -l < "$out/names.txt")" | xargs -P "${JOBS:-6}" -I{} bash -c 'run_case {}'
sort -n "$out/summary.txt"
total=$(wc -l < "$out/names.txt")
passed=$(grep -c " rc=0 " "$out/summary.txt")
skipped=$(grep -c " rc=77 " "$out/summary.txt")  # Catch2's skip: no GPU
echo "$total GPU test cases: $passed passed, $skipped skipped, $((total - passed - skipped)) failed or timed out"
[ "$((passed + skipped))" = "$total" ] || exit 1
[ "$skipped" = "$total" ] && exit 77
exit 0
