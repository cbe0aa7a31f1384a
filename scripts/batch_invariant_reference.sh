#!/usr/bin/env bash
# Exact bfloat16 on this CPU (issue 68): the strong-baselines plan in bfloat16, eager, on the
# batch-invariant step path, with plain bfloat16 AR (ar_standard) timed beside the path's AR.
#
#   bash scripts/batch_invariant_reference.sh OUTPUT_ROOT                  # every cell, then the table
#   bash scripts/batch_invariant_reference.sh OUTPUT_ROOT MODEL DATASET    # one group's 2 cells only
#
# Per (model, dataset) two cells, arms interleaved per sample inside each: lookahead N=5, W=G=7 with
# prompt as reference beside AR, ar_standard and prompt lookup; the dataset's committed CPU-tuned
# preset (lookahead=tuned/cpu-smollm2-135m-instruct-<dataset>) beside AR and ar_standard.
#
# Timed work: run it alone on the machine, pinned to one core (taskset -c 0 bash scripts/...); each
# cell records its CPU affinity, threads and load. Resumable: rerun the same command after a kill or in
# a later sitting. It then writes paper_figures/batch_invariant/ (tables, rows/batch_invariant/, and
# the step-cost curves of both step paths, bench --step-cost). Commit them only when complete and run
# from a clean checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=this_checkout.sh
source scripts/this_checkout.sh
models=(smollm2 gemma3_270m)
datasets=(mt_bench humaneval)
require_arg_count "usage: bash scripts/batch_invariant_reference.sh OUTPUT_ROOT [MODEL DATASET]" $# 1 3
out=$1
only_model=${2:-}
only_dataset=${3:-}
require_group "$only_model" "$only_dataset" "${models[*]}" "${datasets[*]}"
py=.venv/bin/python
for model in "${models[@]}"; do
    for dataset in "${datasets[@]}"; do
        if [ -n "$only_model" ] && { [ "$model" != "$only_model" ] || [ "$dataset" != "$only_dataset" ]; }; then
            continue
        fi
        "$py" -m lade_bench.run +sweep=batch_invariant output_root="$out" model=$model dataset=$dataset
        "$py" -m lade_bench.run +sweep=batch_invariant output_root="$out" model=$model dataset=$dataset \
            "lookahead=tuned/cpu-smollm2-135m-instruct-$dataset" 'arms=[ar,ar_standard,lookahead]'
    done
done
if [ -n "$only_model" ]; then
    echo "group $only_model $only_dataset done in $out/batch_invariant; the table is written by a run without MODEL DATASET"
    exit 0
fi
"$py" -m lade_bench.report.batch_invariant "$out/batch_invariant" --out paper_figures/batch_invariant
for path in standard batch_invariant; do
    "$py" -m lade_bench.bench --step-cost --lookahead 5,7,7 --step-cost-dtypes bfloat16 --step-cost-modes eager \
        --step-path "$path" --output "paper_figures/batch_invariant/step_cost/$path"
done
echo "results: paper_figures/batch_invariant/ (tables/, rows/batch_invariant/, step_cost/)"
