#!/usr/bin/env bash
# The committed reference results (paper_figures/) on the embedded SmolLM2 (and, in the main table,
# Gemma-3-270M), CPU, fp32, 128 new tokens.
#
#   bash scripts/reference_results.sh OUTPUT_ROOT [SHARED_DATA_DIR]
#
# Runs every sweep into OUTPUT_ROOT (resumable: rerun the same command after a kill or in a later
# sitting and finished cells and samples are skipped), then writes figures, tables and report.html
# into paper_figures/. The sweeps run one after another, never in parallel, because their timings
# would disturb each other. The committed run was pinned to one core (`taskset -c 0 bash
# scripts/reference_results.sh ...`, so torch uses 1 thread and the device profile is
# cpu-x86-64-1-threads) while development used the other core: about 10 hours in all. Commit paper_figures/ only when every sweep is
# complete and the code that ran them was a clean checkout (each cell's manifest.json records it).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
    echo "usage: bash scripts/reference_results.sh OUTPUT_ROOT [SHARED_DATA_DIR]" >&2
    exit 2
fi
out=$1
shared=${2:-../shared/data}
py=.venv/bin/python
# One device, one process, arms alternated per sample; N=5, W=G=7 (the official README's setting) is
# the declared headline of every sweep, so the main table never picks a cell on its own samples.
common=(device=cpu max_new_tokens=128 output_root="$out")
smollm2=(model=smollm2 "${common[@]}")
headline=(report.headline.ngram=5 report.headline.window=7 report.headline.guesses=7)

# Main table of one model: four benchmarks, 20 samples each, with the prompt lookup and Jacobi arms
# beside lookahead; every model writes the same sweep folder ("main"), so the table has a model axis.
main_table() {
    local model=$1 dataset
    for dataset in mt_bench humaneval xsum gsm8k; do
        local path=()
        [ "$dataset" = gsm8k ] && path=(dataset.path="$shared/gsm8k/test.jsonl")
        "$py" -m lade_bench.run +sweep=main model="$model" "${common[@]}" dataset="$dataset" "${path[@]}" \
            dataset.limit=20 'arms=[ar,lookahead,prompt_lookup,jacobi]' lookahead.window=7 lookahead.guesses=7 \
            "${headline[@]}"
    done
}

main_table smollm2
# Prompt as reference off / on: 20 MT-Bench questions (both turns).
"$py" -m lade_bench.run +sweep=prompt_ref "${smollm2[@]}" dataset.limit=20 lookahead.window=7 lookahead.guesses=7 \
    "${headline[@]}"
# W x G at N=5 (corners W=1 and G=1 included), prompt as reference off: 10 questions per cell.
"$py" -m lade_bench.run +sweep=ablation_wg "${smollm2[@]}" dataset.limit=10 \
    'lookahead.window=1,4,7' 'lookahead.guesses=1,4,7' "${headline[@]}"
# N at W=G=4: 10 questions per cell.
"$py" -m lade_bench.run +sweep=ablation_n "${smollm2[@]}" dataset.limit=10 \
    'lookahead.ngram=2,3,4,5' lookahead.window=4 lookahead.guesses=4 report.headline.window=4 report.headline.guesses=4
# Greedy vs temperature 1.0 on 20 XSum articles (CNN/DailyMail is hub-only).
"$py" -m lade_bench.run +sweep=sampling "${smollm2[@]}" dataset=xsum dataset.limit=20 \
    lookahead.window=7 lookahead.guesses=7 "${headline[@]}"
# The main table's second model: Gemma-3-270M (base, hybrid sliding-window attention; raw completion
# prompts, src/lade_bench/conf/model/gemma3_270m.yaml). Slower per token than SmolLM2 on a CPU: every logit row of a
# step costs a 262,144-wide LM head (about three hours for the four datasets on 2 cores).
main_table gemma3_270m

"$py" -m lade_bench.report "$out/main" "$out/prompt_ref" "$out/ablation_wg" "$out/ablation_n" "$out/sampling" \
    --out paper_figures
