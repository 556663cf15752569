#!/usr/bin/env bash
# Times the identity and out-proj GEMMs of two builds of coda at a few shapes of the set, the builds taking turns
# (before, after, before, after, ...) so that the GPU's clock drift hits both alike; prints each build's median
# TFLOP/s and the ratio after / before. For refactors that must not change speed. Writes compare.csv to $OUT.
# Usage: bash tools/compare_builds.sh BEFORE/coda AFTER/coda [ROUNDS] [ITERS]
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: bash tools/compare_builds.sh BEFORE/coda AFTER/coda [ROUNDS] [ITERS]" >&2
  exit 2
fi
before=$1 after=$2 rounds=${3:-3} iters=${4:-200}
out=${OUT:-device-logs}
mkdir -p "$out"
echo "build,round,epilogue,m,n,k,ms,tflops,config" > "$out/compare.csv"
status=0
for shape in "4096 2048 2048" "4096 14336 4096" "16384 4096 4096" "16384 2048 8192"; do
  read -r m n k <<< "$shape"
  for round in $(seq 1 "$rounds"); do
    for build in before after; do
      binary=$before
      [ "$build" = after ] && binary=$after
      csv=$(mktemp)
      "$binary" bench gemm --m "$m" --n "$n" --k "$k" --iters "$iters" --csv "$csv" > /dev/null 2>&1 || status=1
      tail -n +2 "$csv" | sed "s/^/$build,$round,/" >> "$out/compare.csv"
      rm -f "$csv"
    done
  done
done
python3 - "$out/compare.csv" <<'PY'
import csv, statistics, sys, collections
runs = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    runs[(r["epilogue"], int(r["m"]), int(r["n"]), int(r["k"]), r["build"])].append(float(r["tflops"]))
print("| epilogue | M x N x K | before TFLOP/s | after TFLOP/s | after / before | runs |")
print("|---|---|---|---|---|---|")
for key in sorted({k[:4] for k in runs}):
    b, a = runs.get(key + ("before",), []), runs.get(key + ("after",), [])
    if not b or not a:
        print(f"| {key[0]} | {key[1]}x{key[2]}x{key[3]} | missing | | | |")
        continue
    mb, ma = statistics.median(b), statistics.median(a)
    spread = lambda xs: f"{min(xs):.0f}-{max(xs):.0f}"
    print(f"| {key[0]} | {key[1]}x{key[2]}x{key[3]} | {mb:.1f} ({spread(b)}) | {ma:.1f} ({spread(a)}) | {ma / mb:.3f} | {len(b)}+{len(a)} |")
PY
exit $status
