#!/usr/bin/env bash
# GEMM throughput over the shape set: coda's kernels (`coda bench gemm`) and their baselines (cuBLAS through
# torch.matmul, the unfused out-proj chain eager and compiled) in one run on one GPU, merged into the markdown
# table of docs/PERFORMANCE.md. Writes coda.csv, torch.csv, bench_gemm.log and gemm_table.md to $OUT
# (default ./device-logs) and prints the table.
# Usage: bash tools/bench_gemm.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then
  echo "usage: bash tools/bench_gemm.sh BUILD_DIR" >&2
  exit 2
fi
build=$1
out=${OUT:-device-logs}
mkdir -p "$out"
status=0

echo "== coda bench gemm (shape set)"
"$build/coda" bench gemm --csv "$out/coda.csv" 2>&1 | tee "$out/bench_gemm.log" || status=1

echo "== torch baselines (shape set)"
python3 tools/bench_torch.py --shapes set ${CODA_BENCH_DYNAMIC_COMPILE:+--dynamic-compile} --csv "$out/torch.csv" 2>&1 | tee -a "$out/bench_gemm.log" || status=1

echo "== GEMM table"
if [ -s "$out/coda.csv" ] && [ -s "$out/torch.csv" ]; then
  python3 tools/gemm_table.py "$out/coda.csv" "$out/torch.csv" > "$out/gemm_table.md" || status=1
  cat "$out/gemm_table.md"
else
  echo "no table: coda.csv or torch.csv is missing or empty (see $out/bench_gemm.log)"
  status=1
fi
exit $status
