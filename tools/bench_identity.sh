#!/usr/bin/env bash
# coda's identity GEMM against cuBLAS (torch.matmul) over the 12-shape set and the LLaMA shapes: each timed with
# settled clocks, then run alone for $CODA_HOLD_MS (default 1500) ms of GPU time while nvidia-smi samples the SM
# clock and power every 50 ms; tools/identity_table.py merges it all into identity_table.md. With CODA_NCU=1 and ncu
# on PATH, also one profiled launch of each at two shapes (CODA_NCU_SHAPES, default 16384x4096x4096 4096x2048x2048),
# for instructions per output tile, and each SM's active cycles (min, mean, max: idle SMs at the start or the tail)
# and DRAM bytes beside them in the csv.
# Writes to $OUT (default ./device-logs): coda.csv, coda.log, torch.csv, torch.log, smi.csv, identity_table.md;
# with ncu also ncu_<coda|cublas>_<M>x<N>x<K>.csv (and .ncu-rep) and ncu.log. Prints the table.
# With CODA_FP8=e4m3 (or e5m2): FP8 operands, coda's identity scaled per tensor against torch._scaled_mm; with
# CODA_BLOCK_SCALES=1 too, coda's block-scaled identity interleaved with it (coda.log: blockwise rows and their
# geometric mean over the per-tensor identity's time), and held alone after it: identity_table.md then splits its
# time over the per-tensor one's into clock and cycles, with each one's energy per GEMM. CODA_PROMOTED=1: coda's
# per-tensor identity with promoted accumulation interleaved too (coda.log: promoted rows and their geometric mean
# over the fast one's time), what promoting costs.
# Usage: bash tools/bench_identity.sh BUILD_DIR
set -uo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.." || exit 2
if [ $# -ne 1 ]; then
  echo "usage: bash tools/bench_identity.sh BUILD_DIR" >&2
  exit 2
fi
build=$1
out=${OUT:-device-logs}
hold_ms=${CODA_HOLD_MS:-1500}
fp8=${CODA_FP8:-}
fp8_args=()
coda_args=()
baseline=torch.matmul
if [ -n "$fp8" ]; then
  fp8_args=(--fp8 "$fp8")
  baseline=torch._scaled_mm
  [ "${CODA_BLOCK_SCALES:-0}" = 1 ] && coda_args=(--block-scales)
  [ "${CODA_PROMOTED:-0}" = 1 ] && coda_args+=(--promoted)
fi
# The GPU the benchmarks run on: CUDA's first visible device (nvidia-smi -i takes an index or a UUID).
gpu=${CODA_SMI_GPU:-${CUDA_VISIBLE_DEVICES:-0}}
gpu=${gpu%%,*}
mkdir -p "$out"
# One kernel cache for the whole script, so that the ncu runs find what the benchmark compiled.
export CODA_CACHE_DIR=${CODA_CACHE_DIR:-$(mktemp -d)}
status=0

# The sampler, with the first field names that a one-off query accepts: power.draw.instant where the driver has it
# (power.draw is an average over the last second on recent GPUs, which would blur the start of a 1.5 s hold), and
# the throttle reasons as clocks_event_reasons.active (recent drivers) or clocks_throttle_reasons.active.
smi_pid=
if command -v nvidia-smi >/dev/null; then
  fields=
  for power in power.draw.instant power.draw; do
    for reasons in ,clocks_event_reasons.active ,clocks_throttle_reasons.active ""; do
      candidate=timestamp,clocks.sm,$power,temperature.gpu$reasons
      if probe=$(nvidia-smi --query-gpu="$candidate" --format=csv,noheader -i "$gpu" 2>&1) &&
         ! grep -qi "not a valid field" <<<"$probe"; then
        fields=$candidate
        break 2
      fi
    done
  done
  if [ -n "$fields" ]; then
    echo "== nvidia-smi samples of GPU $gpu every 50 ms: $fields"
    # Line-buffered where stdbuf exists: the sampler is killed at the end, and a full buffer would lose the last holds.
    line_buffered=()
    command -v stdbuf >/dev/null && line_buffered=(stdbuf -oL)
    echo "$fields" > "$out/smi.csv"  # the header that tools/identity_table.py reports the power field from
    "${line_buffered[@]}" nvidia-smi --query-gpu="$fields" --format=csv,noheader -lms 50 -i "$gpu" \
      >> "$out/smi.csv" 2> "$out/smi.err" &
    smi_pid=$!
    trap '[ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null' EXIT
  else
    echo "nvidia-smi accepts none of the queries (last answer: $probe): no clock or power samples"
  fi
else
  echo "no nvidia-smi: no clock or power samples"
fi

echo "== coda bench gemm --shapes all --identity-only --hold-ms $hold_ms ${fp8_args[*]} ${coda_args[*]}"
"$build/coda" bench gemm --shapes all --identity-only --hold-ms "$hold_ms" "${fp8_args[@]}" "${coda_args[@]}" \
  --csv "$out/coda.csv" 2>&1 |
  tee "$out/coda.log" || status=1

echo "== $baseline (cuBLAS) --shapes all --hold-ms $hold_ms"
python3 tools/bench_torch.py --shapes all --no-chain --hold-ms "$hold_ms" "${fp8_args[@]}" --csv "$out/torch.csv" 2>&1 |
  tee "$out/torch.log" || status=1

if [ -n "$smi_pid" ]; then
  sleep 3  # without stdbuf, 3 s of later samples (more than a 4 KB buffer) push the last hold's out to the file
  kill "$smi_pid" 2>/dev/null
  wait "$smi_pid" 2>/dev/null
  smi_pid=
  echo "nvidia-smi: $(($(wc -l < "$out/smi.csv") - 1)) samples"
fi

# One launch of each kernel under ncu (the 6th: after some of the settle's, so the clock is a working one), as
# ncu_<side>_<shape>.csv. A metric this ncu does not know fails the whole run, so a failure retries with the two
# that every ncu has. A failure here is reported and leaves the exit status alone: the profile is optional.
ncu_metrics=smsp__inst_executed.sum,sm__cycles_elapsed.max,smsp__cycles_active.avg
ncu_metrics+=,sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_gmma.sum
ncu_metrics+=,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,dram__bytes_read.sum,dram__bytes_write.sum
profile() {  # SIDE SHAPE KERNEL_FILTER COMMAND...
  local side=$1 shape=$2 filter=$3
  shift 3
  local report="$out/ncu_${side}_${shape}"
  for metrics in "$ncu_metrics" smsp__inst_executed.sum,sm__cycles_elapsed.max; do
    rm -f "$report.ncu-rep" "$report.csv"
    echo "== ncu $side $shape --metrics $metrics" >> "$out/ncu.log"
    ncu --clock-control none --metrics "$metrics" -k "$filter" --launch-skip 5 --launch-count 1 -f -o "$report" \
      "$@" >> "$out/ncu.log" 2>&1
    # Base units (no "Minst"), where this ncu has the option.
    if [ -s "$report.ncu-rep" ] &&
       { ncu --import "$report.ncu-rep" --csv --page raw --print-units base > "$report.csv" 2>> "$out/ncu.log" ||
         ncu --import "$report.ncu-rep" --csv --page raw > "$report.csv" 2>> "$out/ncu.log"; } &&
       grep -q "Kernel Name" "$report.csv"; then
      echo "ncu $side $shape: $report.csv"
      return 0
    fi
    echo "ncu $side $shape: no profile with --metrics $metrics (see $out/ncu.log)"
  done
  rm -f "$report.csv"
  return 1
}
if [ "${CODA_NCU:-0}" = 1 ]; then
  if command -v ncu >/dev/null; then
    echo "== ncu: instructions per kernel"
    for shape in ${CODA_NCU_SHAPES:-16384x4096x4096 4096x2048x2048}; do
      IFS=x read -r m n k <<<"$shape"
      profile coda "$shape" regex:hopper_gemm \
        "$build/coda" bench gemm --m "$m" --n "$n" --k "$k" --iters 10 --identity-only "${fp8_args[@]}"
      profile cublas "$shape" "regex:nvjet|sm90|gemm" \
        python3 tools/bench_torch.py --shapes one --m "$m" --n "$n" --k "$k" --iters 10 --no-chain "${fp8_args[@]}"
    done
  else
    echo "CODA_NCU=1 but no ncu on PATH: no instruction counts"
  fi
fi

echo "== identity table"
if [ -s "$out/coda.csv" ] && [ -s "$out/torch.csv" ]; then
  table_args=("$out/coda.csv" "$out/torch.csv" --holds "$out/coda.log" "$out/torch.log" --baseline "$baseline")
  [ -s "$out/smi.csv" ] && table_args+=(--smi "$out/smi.csv")
  ncu_csvs=("$out"/ncu_*.csv)
  ((${#ncu_csvs[@]})) && table_args+=(--ncu "${ncu_csvs[@]}")
  python3 tools/identity_table.py "${table_args[@]}" > "$out/identity_table.md" || status=1
  cat "$out/identity_table.md"
else
  echo "no table: coda.csv or torch.csv is missing or empty (see $out/coda.log and $out/torch.log)"
  status=1
fi
exit $status
