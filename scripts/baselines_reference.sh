#!/usr/bin/env bash
# Strong baselines on this CPU (issue 23's measured table): AR, lookahead and prompt lookup in
# {float32, bfloat16} x {eager, compiled} on both embedded models (SmolLM2-135M-Instruct, Gemma-3-270M),
# 20 MT-Bench questions (both turns) and 20 HumanEval problems, greedy, 64 new tokens.
#
#   bash scripts/baselines_reference.sh OUTPUT_ROOT                  # every cell, then the table
#   bash scripts/baselines_reference.sh OUTPUT_ROOT MODEL DATASET    # one group's 8 cells only
#
# Per (model, dataset, dtype, mode) two cells, arms interleaved per sample inside each:
#   - lookahead N=5, W=G=7 with prompt as reference (the engine's default, the declared headline)
#     beside AR and prompt lookup;
#   - the committed CPU-tuned preset of the dataset (lookahead=tuned/cpu-smollm2-135m-instruct-<dataset>,
#     tuned on SmolLM2, used as is on Gemma) beside AR.
# The four settings of one (model, dataset) run back to back, so the AR-against-AR comparison across
# cells (python -m lade_bench.report.baselines) spans minutes, not hours, of drift. That comparison is
# only made between cells timed on one CPU kind (each run records its processor): where sittings land
# on different machines, run a whole group in one sitting (the MODEL DATASET form); a group split
# across CPUs gets empty AR gains, and its cells must be deleted and run again together. Compiled
# cells compile each shape on an untimed run (compile_time_s); the timed runs exclude it.
#
# Timed work: run it alone on the machine, pinned to one core (taskset -c 0 bash scripts/...), as the
# other committed CPU results are; each cell records its CPU affinity, threads and load. Resumable:
# rerun the same command after a kill or in a later sitting. It then writes
# paper_figures/baselines/tables/baselines.{md,csv}, rows/baselines/ (the sweep's archive) and the step-cost
# curves (bench --step-cost). Commit them only when complete and run from a clean checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=this_checkout.sh
source scripts/this_checkout.sh
models=(smollm2 gemma3_270m)
datasets=(mt_bench humaneval)
require_arg_count "usage: bash scripts/baselines_reference.sh OUTPUT_ROOT [MODEL DATASET]" $# 1 3
out=$1
only_model=${2:-}
only_dataset=${3:-}
require_group "$only_model" "$only_dataset" "${models[*]}" "${datasets[*]}"
py=.venv/bin/python
tokens=64
# +sweep=baselines: CPU, 20 samples, 64 tokens, N5 W7 G7 declared, arms ar, lookahead, prompt_lookup.
common=(+sweep=baselines max_new_tokens=$tokens output_root="$out")
settings=("dtype=float32 compile=false" "dtype=float32 compile=true" "dtype=bfloat16 compile=false"
    "dtype=bfloat16 compile=true")
for model in "${models[@]}"; do
    for dataset in "${datasets[@]}"; do
        if [ -n "$only_model" ] && { [ "$model" != "$only_model" ] || [ "$dataset" != "$only_dataset" ]; }; then
            continue
        fi
        for setting in "${settings[@]}"; do
            # shellcheck disable=SC2086  # a setting is two overrides
            "$py" -m lade_bench.run "${common[@]}" model=$model dataset=$dataset $setting
            # shellcheck disable=SC2086
            "$py" -m lade_bench.run "${common[@]}" model=$model dataset=$dataset $setting \
                "lookahead=tuned/cpu-smollm2-135m-instruct-$dataset" 'arms=[ar,lookahead]'
        done
    done
done
if [ -n "$only_model" ]; then
    echo "group $only_model $only_dataset done in $out/baselines; the table is written by a run without MODEL DATASET"
    exit 0
fi
"$py" -m lade_bench.report.baselines "$out/baselines" --out paper_figures/baselines
"$py" -m lade_bench.bench --step-cost --lookahead 5,7,7 --output paper_figures/baselines/step_cost
echo "results: paper_figures/baselines/ (tables/baselines.md, rows/baselines/, step_cost/)"
