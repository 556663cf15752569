#!/usr/bin/env bash
# Every coda::blocks epilogue at its block shape (`coda bench block`, d = 2048 and 4096, M = 16384, V = 32768, and the
# rows that depend on V again at LLaMA-3's V = 128256 for d = 2048; `--list` prints them) with cuBLAS
# (torch.matmul at the same shapes and layouts) and torch's copy bandwidth measured in the same run, merged into
# one markdown table (tools/bench_block_cublas.py). Writes block.csv, torch_block.csv, bench_block.log and
# block_table.md to $OUT (default ./device-logs) and prints the table.
# Usage: bash tools/bench_block.sh [BUILD_DIR] [coda bench block options...]
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift $(( $# > 0 ? 1 : 0 ))
out=${OUT:-device-logs}
mkdir -p "$out"
status=0

echo "== coda bench block $*"
"$build/coda" bench block --csv "$out/block.csv" "$@" 2>&1 | tee "$out/bench_block.log" || status=1

echo "== cuBLAS and torch copy at the same shapes, and the table"
if [ -s "$out/block.csv" ] && [ "$(wc -l < "$out/block.csv")" -gt 1 ]; then
  python3 tools/bench_block_cublas.py "$out/block.csv" --csv "$out/torch_block.csv" > "$out/block_table.md" \
    2>> "$out/bench_block.log" || status=1
  cat "$out/block_table.md"
else
  echo "no table: coda bench block wrote no measurements (see $out/bench_block.log)"
  status=1
fi
exit $status
