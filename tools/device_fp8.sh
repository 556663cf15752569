#!/usr/bin/env bash
# The FP8 GPU run (issue 28), step by step, each step fitting one device call of 10 minutes.
# Needs carry/build (tools/pack_device_build.sh) and, for the Python steps, carry/wheels and carry/peers
# (tools/pack_device_python.sh --peers). Logs go to $OUT (default ./device-logs).
#   tests   the C++ GPU tests of FP8 (GEMMs of one and two types, block scales, reduce_group, FP8 tile tensors, the
#           FP8 blocks, tensorwise, block-wise and row-wise): about 560 s on an H200, so over one call's 540 s step;
#           tests-gemm (about 320 s) and tests-blocks (about 240 s) are its two halves
#   suite   every C++ GPU test case, FP8 or not, six processes at once (tools/gpu_suite.sh): about 260 s on an H100
#   regress the BF16 GPU tests of what the FP8 work touched in the Hopper templates (the block's epilogues, stream-K,
#           the random GEMMs); their SASS at the default configs is unchanged (tools/compare_cubins.py)
#   python  the Python GPU tests of FP8 (scaled_mm against torch._scaled_mm, block scales, the FP8 layers and models)
#   gemm    coda's FP8 identity GEMM against torch._scaled_mm over the 12-shape set and the LLaMA shapes (the table
#           against its fast-accum rows, like-for-like; the precise-accum ones' means beside), and the block-scaled
#           identity and the promoted per-tensor one (CODA_PROMOTED=0: not) against the fast per-tensor one
#           (coda.log's blockwise and promoted rows); with CODA_NCU=1, ncu of both at
#           CODA_NCU_SHAPES too (instructions per tile, each SM's active cycles, DRAM bytes: ncu_*.csv)
#   interleaved  tools/bench_scaled_mm.py --blockwise: coda's FP8 GEMM and torch._scaled_mm (fast-accum and
#           precise-accum, two systems) in one process, ABBA turns per shape over the 12-shape set and the LLaMA shapes
#           (the block-scaled ones beside them)
#   layer   tools/bench_block.py --fp8 at d = 4096, torchao and the FP8 GEMM floor each in fast and in precise
#           accumulation (LAYER_ONLY: another --only text, e.g. "fp8 layer d=2048 sdpa";
#           LAYER_HOLD_S: also each system alone this many seconds, its sustained ms, MHz, W and J a step;
#           LAYER_SYSTEMS: only the systems whose name contains one of these '|'-separated texts)
#   model   tools/bench_block.py --fp8 --only "llama3.2-1b fp8 step": coda's LLaMA-3.2-1B in FP8 (tensorwise and
#           rowwise, FP8 weight gradients) against Hugging Face's under torchao + compile in both accumulations, and
#           block-wise against Hugging Face's in bf16 + compile; each also against coda bf16 and Hugging Face's with
#           Liger's fused linear cross-entropy (MODEL_LAYERS: default 16; MODEL_RECIPES: some of "tensorwise rowwise
#           blockwise", default all three, one group each; MODEL_SYSTEMS: only the baselines whose name contains one
#           of these '|'-separated texts, e.g. 'fast accum|Liger')
#   profile tools/profile_block.py --fp8 at d = 4096 with SDPA (PROFILE_RECIPES: default tensorwise+wgrad,
#           rowwise+wgrad, blockwise), coda's bf16 layer and torchao's recipe + torch.compile (both accumulations)
#           beside each; the FP8 GEMMs' floor is torch._scaled_mm with fast accumulation
#   accuracy  tools/fp8_accumulation.py: each recipe's weight-gradient (K = 16384 and 65536 tokens) and dgrad error
#           against fp64 of the same FP8 operands, coda beside cuBLAS fast and precise (ACCURACY_ARGS: more arguments)
#   curve   tools/fp8_loss_curve.py, 300 steps of fp32, bf16 and FP8, each recipe with and without FP8 weight gradients
#           (CURVE_RECIPES: the recipes, comma-separated); fails where a recipe's loss gap to bf16 passes its tolerance
#   ab      the 2-CTA clusters and the wider tiles against ping-pong 128 x 128 for the per-tensor FP8 identity, per shape
#           in one `coda tune --solo --config ...` (AB_SHAPES; AB_CONFIGS: each config's words after ping-pong's,
#           '|'-separated, "" = ping-pong itself); tools/tune_table.py makes fp8_ab.md of the log: each config's time
#           over the first one's per shape, and their geometric means
#   abblock the same for the block-scaled identity on cooperative 128 x 128, the one tile it takes (AB_CONFIGS: words
#           after its; by default its 2-CTA clusters, cluster=2 and cluster_n=2)
#   abgraphs  a template change against the build before it (BASE, default carry/build_base: its coda binary), on the
#           epilogues of the layer at d = 4096 at their GEMM shapes, each on the config `coda dump` names (ABBA turns of
#           `coda tune`, tools/ab_builds.py: ab_<graph>.md); AB_GRAPHS: "graph:MxNxK ..." instead of the default set;
#           BASE_CACHE_DIR: a kernel cache warmed for BASE (`coda warm`), as CODA_CACHE_DIR is for BUILD
#   ncublock  ncu of one launch of the block-scaled identity at NCU_SHAPE (default 8192x4096x11008): the full set,
#           and its source page as csv with every SASS instruction's stall samples (ncu_block_source.csv;
#           tools/ncu_hotspots.py lists the top ones)
#   ncugraph  the same for one launch of a graph's GEMM kernel through `coda tune` (NCU_GRAPH: a .coda file, default
#           tools/graphs/swiglu_backward_fp8_t.coda; NCU_SHAPE, default 16384x14336x4096; NCU_CONFIG, default the
#           config `coda dump` names): the slowest epilogues of the FP8 layer over their GEMM floor (PERFORMANCE.md)
#   ncucublas  the same for one torch._scaled_mm call at NCU_SHAPE (NCU_RECIPE: blockwise, the default, or
#           tensorwise; tools/torch_scaled_mm_once.py): cuBLAS's kernel, its launch and its stall samples beside coda's
#   records every named candidate of the FP8 blocks' GEMM epilogues at the d = 4096 layer's shapes, each alone (`coda tune
#           --solo` into $out/tuning.tsv; RECORD_GRAPHS: "graph:MxNxK ..." instead), then tools/shipped_records.py: the
#           winners 6% or more ahead of the default as lines for src/tune/builtin_tuning.cpp (records.tsv)
# Usage: bash tools/device_fp8.sh tests regress python gemm ... ; BUILD=carry/build by default; STEP_S: each step's
# time limit (default 540 s); LAYER_BUDGET_S: bench_block.py's --budget-s (default 400).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-carry/build}
out=${OUT:-device-logs}
mkdir -p "$out"
export CODA_CACHE_DIR=${CODA_CACHE_DIR:-$(mktemp -d)} PYTHONUNBUFFERED=1
step_s=${STEP_S:-540}
status=0
# The coda settings every step ran under, beside its logs.
env | grep '^CODA_' | sort > "$out/coda_env.txt" || true
python_ready=0
python_setup() {  # the wheel and the peers into /tmp/site, as tools/device_torch.sh installs them (no step: just that)
  ((python_ready)) && return 0
  bash tools/device_torch.sh || return 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  python_ready=1
}
systems_args() {  # TEXTS: '|'-separated TEXTS as bench_block.py's --systems, in the array `systems` (none if empty)
  systems=()
  if [ -n "$1" ]; then
    IFS='|' read -r -a names <<< "$1"
    systems=(--systems "${names[@]}")
  fi
}
ncu_summary() {  # REPORT [PATTERN]: REPORT.ncu-rep's details and SASS source page, PATTERN's lines, the top stalls
  local report=$1 pattern=${2:-}
  [ -s "$report.ncu-rep" ] || return 0
  ncu --import "$report.ncu-rep" --page details > "$report.txt" 2>> "$report.log" || status=1
  ncu --import "$report.ncu-rep" --page source --csv --print-source sass > "${report}_source.csv" \
    2>> "$report.log" || status=1
  [ -n "$pattern" ] && grep -E "$pattern" "$report.txt" | head -n 12
  python3 tools/ncu_hotspots.py "${report}_source.csv" | head -n 30 || status=1
}
for step in "$@"; do
  case $step in
    tests|tests-gemm|tests-blocks)
      blocks="the block's FP8 epilogues*,the block's block-wise FP8 epilogues*,the block's row-wise FP8 epilogues*"
      case $step in
        tests) filter="[fp8],$blocks" ;;
        tests-gemm) filter="[fp8]" ;;  # (the blocks' cases are tagged [gpu] alone)
        tests-blocks) filter=$blocks ;;
      esac
      echo "== C++ GPU tests of FP8 ($step)"
      timeout "$step_s" "$build/tests/coda_gpu_tests" "$filter" --durations yes \
        > "$out/gpu_fp8_$step.log" 2>&1 || status=1
      grep -E "FAILED|passed|failed|with expansion" "$out/gpu_fp8_$step.log" | tail -n 20 ;;
    suite)
      echo "== every C++ GPU test case (tools/gpu_suite.sh)"
      OUT=$out CASE_S=$step_s bash tools/gpu_suite.sh "$build" > "$out/gpu_suite.log" 2>&1 || status=1
      tail -n 1 "$out/gpu_suite.log"
      grep -v " rc=0 " "$out/gpu_suite/summary.txt" | head -n 10 ;;
    regress)
      echo "== C++ GPU tests of BF16 that the FP8 work's template changes touch"
      timeout "$step_s" "$build/tests/coda_gpu_tests" "the block's epilogues*,stream-K*,random GEMM*" --durations yes \
        > "$out/gpu_regress.log" 2>&1 || status=1
      grep -E "FAILED|passed|failed|with expansion" "$out/gpu_regress.log" | tail -n 20 ;;
    python)
      echo "== Python GPU tests of FP8"
      python_setup || exit 1
      (cd /tmp && timeout "$step_s" python3 -m pytest "$OLDPWD/tests/python" -m gpu -k "fp8 or blockwise or scaled_mm" -q \
        -p no:cacheprovider -rs) > "$out/pytest_fp8.log" 2>&1 || status=1
      grep -E "passed|failed|FAILED|Error" "$out/pytest_fp8.log" | tail -n 20 ;;
    gemm)
      echo "== FP8 identity GEMM against torch._scaled_mm"
      python_setup || exit 1
      CODA_FP8=e4m3 CODA_BLOCK_SCALES=1 CODA_PROMOTED=${CODA_PROMOTED:-1} OUT=$out timeout "$step_s" \
        bash tools/bench_identity.sh "$build" \
        > "$out/fp8_gemm.log" 2>&1 || status=1
      tail -n 30 "$out/fp8_gemm.log" ;;
    interleaved)
      echo "== tools/bench_scaled_mm.py: coda's FP8 GEMM and torch._scaled_mm in turns"
      python_setup || exit 1
      timeout "$step_s" python3 tools/bench_scaled_mm.py --shapes all --blockwise --out "$out" \
        > "$out/fp8_interleaved.log" 2>&1 || status=1
      tail -n 24 "$out/fp8_interleaved.log" ;;
    layer)
      echo "== tools/bench_block.py --fp8"
      python_setup || exit 1
      systems_args "${LAYER_SYSTEMS:-}"
      timeout "$step_s" python3 tools/bench_block.py --fp8 --out "$out" --rounds 3 --budget-s "${LAYER_BUDGET_S:-400}" \
        --hold-s "${LAYER_HOLD_S:-0}" --only "${LAYER_ONLY:-fp8 layer d=4096}" "${systems[@]}" \
        > "$out/fp8_layer.log" 2>&1 || status=1
      grep -v "^\[" "$out/fp8_layer.log" | tail -n 20 ;;
    model)
      echo "== tools/bench_block.py --fp8: the LLaMA-3.2-1B step in FP8"
      python_setup || exit 1
      systems_args "${MODEL_SYSTEMS:-}"
      timeout "$step_s" python3 tools/bench_block.py --fp8 --out "$out" --rounds 3 --budget-s "${LAYER_BUDGET_S:-400}" \
        --only "llama3.2-1b fp8 step" --llama-layers "${MODEL_LAYERS:-16}" \
        --llama-recipes ${MODEL_RECIPES:-tensorwise rowwise blockwise} "${systems[@]}" > "$out/fp8_model.log" 2>&1 \
        || status=1
      grep -v "^\[" "$out/fp8_model.log" | tail -n 16 ;;
    profile)
      echo "== tools/profile_block.py --fp8: every kernel of the FP8 layers' step beside its floor"
      python_setup || exit 1
      timeout "$step_s" python3 tools/profile_block.py --fp8 ${PROFILE_RECIPES:-tensorwise+wgrad rowwise+wgrad blockwise} \
        --fp8-only --torchao --d 4096 --attention sdpa --out "$out" > "$out/fp8_profile.log" 2>&1 || status=1
      tail -n 5 "$out/fp8_profile.log" ;;
    accuracy)
      echo "== tools/fp8_accumulation.py"
      python_setup || exit 1
      timeout "$step_s" python3 tools/fp8_accumulation.py --out "$out" ${ACCURACY_ARGS:-} > "$out/fp8_accuracy.log" 2>&1 \
        || status=1
      tail -n 40 "$out/fp8_accuracy.log" ;;
    curve)
      echo "== tools/fp8_loss_curve.py"
      python_setup || exit 1
      recipes=()
      [ -n "${CURVE_RECIPES:-}" ] && recipes=(--recipes "$CURVE_RECIPES")
      timeout "$step_s" python3 tools/fp8_loss_curve.py --out "$out" "${recipes[@]}" > "$out/fp8_curve.log" 2>&1 \
        || status=1
      tail -n 14 "$out/fp8_curve.log" ;;
    ab|abblock)
      # The identity graphs (coda bench gemm's), as files for `coda tune`. Each shape: every config alone, settled,
      # twice in opposite orders (--solo); its table names each config's text.
      graphs=$(mktemp -d)
      printf '%s\n' "graph identity_fp8 gemm in=e4m3 a=k b=k" "%acc = accumulator" "%scale = scalar" \
        "%scaled = mul %acc %scale" "%D = store bf16 %scaled" > "$graphs/identity_fp8.coda"
      printf '%s\n' "graph identity_fp8_blockwise gemm in=e4m3 a=k b=k scales=block" "%acc = accumulator" \
        "%D = store bf16 %acc" > "$graphs/identity_fp8_blockwise.coda"
      if [ "$step" = ab ]; then
        graph=$graphs/identity_fp8.coda base="hopper bm=128 bn=128 bk=64 stages=6 pingpong"
        extras=${AB_CONFIGS:-"|cluster=2|cluster_n=2|cooperative bn=256 stages=4|cooperative bn=256 stages=4 cluster=2|cooperative bm=256 stages=4 cluster_n=2"}
      else
        graph=$graphs/identity_fp8_blockwise.coda base="hopper bm=128 bn=128 bk=64 stages=6 cooperative"
        extras=${AB_CONFIGS:-"|cluster=2|cluster_n=2"}
      fi
      configs=()
      IFS='|' read -r -a words <<< "$extras"
      for w in "${words[@]}"; do configs+=(--config "$base $w"); done
      for shape in ${AB_SHAPES:-16384x4096x14336 16384x14336x4096 16384x8192x8192 8192x128256x4096 4096x4096x4096 8192x4096x11008}; do
        IFS=x read -r m n k <<< "$shape"
        echo "== $step $shape"
        timeout "$step_s" "$build/coda" tune "$graph" --m "$m" --n "$n" --k "$k" --solo --iters 30 "${configs[@]}" \
          >> "$out/fp8_$step.log" 2>&1 || status=1
      done
      python3 tools/tune_table.py "$out/fp8_$step.log" > "$out/fp8_$step.md" || status=1
      tail -n 20 "$out/fp8_$step.md" ;;
    abgraphs)
      base=${BASE:-carry/build_base}
      cache_args=(--b-env "CODA_CACHE_DIR=$CODA_CACHE_DIR")
      [ -n "${BASE_CACHE_DIR:-}" ] && cache_args+=(--a-env "CODA_CACHE_DIR=$BASE_CACHE_DIR")
      for pair in ${AB_GRAPHS:-swiglu_backward_fp8_t:16384x14336x4096 rmsnorm_backward_residual_fp8_t:16384x4096x28672 \
          rmsnorm_backward_residual_fp8_bf16_dx_t:16384x4096x12288 gate_up_swiglu_fp8:16384x28672x4096 \
          qkv_rope_fp8:16384x12288x4096 out_proj_fp8:16384x4096x14336 swiglu_backward:16384x14336x4096 \
          gate_up_swiglu:16384x28672x4096}; do
        graph=${pair%%:*} shape=${pair#*:}
        config=$("$build/coda" dump "tools/graphs/$graph.coda" | sed -n 's|^// config: ||p' | head -n 1)
        echo "== abgraphs $graph $shape ($config)"
        timeout "$step_s" python3 tools/ab_builds.py "$base" "$build" "${cache_args[@]}" --name "ab_$graph" --out "$out" \
          --timeout-s 30 --shapes "$shape" -- tune "tools/graphs/$graph.coda" --iters 30 --config "$config" \
          | grep -E "^\| $graph " || status=1
      done ;;
    ncublock)
      IFS=x read -r m n k <<< "${NCU_SHAPE:-8192x4096x11008}"
      report="$out/ncu_block"
      echo "== ncu of the block-scaled identity, $m x $n x $k"
      # bench gemm runs the per-tensor identity beside it; at the default shape that one runs on the pairs
      # (hopper_gemm_pair), so the launches named hopper_gemm are the block-scaled one's (cooperative 128 x 128).
      timeout "$step_s" ncu --clock-control none --set full --import-source no \
        -k hopper_gemm --launch-skip 1 --launch-count 1 -f -o "$report" \
        "$build/coda" bench gemm --fp8 e4m3 --block-scales --identity-only --m "$m" --n "$n" --k "$k" --iters 3 \
        > "$report.log" 2>&1 || status=1
      ncu_summary "$report" ;;
    ncucublas)
      IFS=x read -r m n k <<< "${NCU_SHAPE:-8192x4096x11008}"
      report="$out/ncu_cublas"
      echo "== ncu of torch._scaled_mm (${NCU_RECIPE:-blockwise}), $m x $n x $k"
      python_setup || exit 1
      timeout "$step_s" ncu --clock-control none --set full --import-source no --profile-from-start off -c 4 -f \
        -o "$report" python3 tools/torch_scaled_mm_once.py --m "$m" --n "$n" --k "$k" --recipe "${NCU_RECIPE:-blockwise}" \
        > "$report.log" 2>&1 || status=1
      ncu_summary "$report" "^  [a-z_0-9]+.*\(|Elapsed Cycles|SM Frequency|Issue Slots Busy|Registers Per|Cluster Size" ;;
    ncugraph)
      graph=${NCU_GRAPH:-tools/graphs/swiglu_backward_fp8_t.coda}
      IFS=x read -r m n k <<< "${NCU_SHAPE:-16384x14336x4096}"
      config=${NCU_CONFIG:-$("$build/coda" dump "$graph" | sed -n 's|^// config: ||p' | head -n 1)}
      report="$out/ncu_$(basename "$graph" .coda)"
      echo "== ncu of $graph, $m x $n x $k, $config"
      timeout "$step_s" ncu --clock-control none --set full --import-source no -k regex:hopper_gemm --launch-skip 2 \
        --launch-count 1 -f -o "$report" "$build/coda" tune "$graph" --m "$m" --n "$n" --k "$k" --iters 5 \
        --config "$config" > "$report.log" 2>&1 || status=1
      ncu_summary "$report" "Duration|Elapsed Cycles|SM Frequency|Issue Slots Busy|Tensor|Memory Throughput|DRAM Throughput" ;;
    records)
      for pair in ${RECORD_GRAPHS:-qkv_rope_fp8:16384x12288x4096 qkv_rope_fp8_rowwise:16384x12288x4096 \
          gate_up_swiglu_fp8:16384x28672x4096 gate_up_swiglu_fp8_rowwise:16384x28672x4096 \
          out_proj_fp8:16384x4096x14336 out_proj_fp8_rowwise:16384x4096x14336 out_proj_fp8_bf16_h:16384x4096x14336 \
          out_proj_fp8_rowwise_bf16_h:16384x4096x14336 out_proj_fp8:16384x4096x4096 dgrad_fp8_rowwise:16384x4096x4096 \
          swiglu_backward_fp8:16384x14336x4096 swiglu_backward_fp8_rowwise:16384x14336x4096 \
          rmsnorm_backward_residual_fp8:16384x4096x28672 rmsnorm_backward_residual_fp8_rowwise:16384x4096x28672 \
          rmsnorm_backward_residual_fp8_bf16_dx:16384x4096x12288 wgrad_fp8_accumulate:4096x14336x16384 \
          wgrad_fp8_accumulate:28672x4096x16384 wgrad_fp8_rowwise_accumulate:28672x4096x16384}; do
        graph=${pair%%:*} shape=${pair#*:}
        IFS=x read -r m n k <<< "$shape"
        echo "== records $graph $shape"
        CODA_TUNING_FILE="$out/tuning.tsv" timeout "$step_s" "$build/coda" tune "tools/graphs/$graph.coda" --m "$m" \
          --n "$n" --k "$k" --solo --iters 20 >> "$out/records.log" 2>&1 || status=1
      done
      python3 tools/shipped_records.py --coda "$build/coda" --tuning "$out/tuning.tsv" "$out/records.log" \
        > "$out/records.tsv" || status=1
      cat "$out/records.tsv" ;;
    *) echo "device_fp8.sh: unknown step '$step' (tests, tests-gemm, tests-blocks, regress, python, gemm, interleaved, layer, model, profile, accuracy, curve, ab, abblock, abgraphs, ncublock, ncugraph, records)" >&2; exit 2 ;;
  esac
done
exit $status
