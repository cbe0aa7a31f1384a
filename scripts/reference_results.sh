#!/usr/bin/env bash
# The committed reference results (paper_figures/) on the embedded SmolLM2-135M-Instruct and
# Gemma-3-270M, CPU, fp32, SDPA attention: the regeneration plan of issue 22.
#
#   bash scripts/tune_reference.sh OUTPUT_ROOT                       # first: the CPU-tuned presets
#   taskset -c 0 bash scripts/reference_results.sh OUTPUT_ROOT [SHARED_DATA_DIR]          # everything
#   taskset -c 0 bash scripts/reference_results.sh OUTPUT_ROOT SHARED_DATA_DIR GROUP      # one group
#   bash scripts/reference_results.sh --groups                                            # list them
#
# A group is what must be timed on one machine because the results compare its cells with each
# other: one (model, dataset) of the main table (its declared and tuned cells), or one whole ablation
# or sampling sweep (its trend across cells). Where sittings land on different machines (every cell
# records its CPU), run one whole group per sitting; the run without GROUP then skips every done
# cell and writes the archives and the report.
#
# Runs every sweep into OUTPUT_ROOT (resumable: rerun the same command after a kill or in a later
# sitting and finished cells and samples are skipped), then archives each sweep (its per-sample rows,
# cell records and device profiles: paper_figures/rows/<sweep>/) and builds figures, tables and
# report.html into paper_figures/ from those archives.
# The sweeps run one after another, never in parallel, and alone on the machine (no tests, tuner or
# second sweep beside them): each cell records its CPU affinity, threads, load and resume gaps. Pinned
# to one core with one torch thread, as every committed CPU result is. Resume a sweep on the commit
# it started on (each cell's manifest records it); commit paper_figures/ only when every sweep is
# complete and ran from a clean checkout.
#
# Output lengths: 256 new tokens where answers are long (MT-Bench, code, GSM8K) so that most end by
# themselves; 128 for XSum summaries. The report counts the outputs that hit the cap.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=this_checkout.sh
source scripts/this_checkout.sh
models=(smollm2 gemma3_270m)
datasets=(mt_bench humaneval mbpp classeval gsm8k xsum)
groups=()
for model in "${models[@]}"; do
    for dataset in "${datasets[@]}"; do
        groups+=("main:$model:$dataset")
    done
done
groups+=(prompt_ref ablation_wg ablation_n sampling)
if [ "${1:-}" = --groups ]; then
    printf '%s\n' "${groups[@]}"
    exit 0
fi
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
    echo "usage: bash scripts/reference_results.sh OUTPUT_ROOT [SHARED_DATA_DIR [GROUP]]  (GROUP: --groups lists them)" >&2
    exit 2
fi
out=$1
shared=${2:-../shared/data}
only=${3:-}
if [ -n "$only" ] && [[ ! " ${groups[*]} " =~ " $only " ]]; then
    echo "unknown group '$only'; the groups are: ${groups[*]}" >&2
    exit 2
fi
py=.venv/bin/python
# shellcheck source=universal_draft.sh
source scripts/universal_draft.sh
common=(device=cpu output_root="$out")
smollm2=(model=smollm2 "${common[@]}")
# N=5, W=G=7 with prompt as reference (the official README's setting) is the declared headline of
# every sweep, so no table picks a cell on its own samples.
headline=(report.headline.ngram=5 report.headline.window=7 report.headline.guesses=7)

# MT-Bench and HumanEval: the tuner's draw (tune.yaml: shuffle_seed 0) past its 4 probe + 10 held-out
# samples (scripts/tune_reference.sh), so the tuned preset is never reported on samples it was chosen
# on, and MT-Bench's questions mix its categories (its file order starts with 20 writing and roleplay
# questions). The other benchmarks were never tuned on: file order, as their harnesses run them.
past_tune=(dataset.shuffle_seed=0 dataset.offset=14)

dataset_args() {  # the dataset's path in the shared data folder, its sample draw and its output length
    case $1 in
        mt_bench | humaneval) echo "${past_tune[*]} max_new_tokens=256" ;;
        gsm8k) echo "dataset.path=$shared/gsm8k/test.jsonl max_new_tokens=256" ;;
        mbpp) echo "dataset.path=$shared/mbpp/mbpp.jsonl max_new_tokens=256" ;;
        classeval) echo "dataset.path=$shared/classeval/ClassEval_data.json max_new_tokens=256" ;;
        xsum) echo "max_new_tokens=128" ;;
        *) echo "max_new_tokens=256" ;;
    esac
}

tuned_preset() {  # the committed CPU-tuned preset of the dataset's kind (tuned on SmolLM2)
    case $1 in
        humaneval | mbpp | classeval) echo "tuned/cpu-smollm2-135m-instruct-humaneval" ;;
        *) echo "tuned/cpu-smollm2-135m-instruct-mt_bench" ;;
    esac
}

# Main table, one (model, dataset): 20 samples; the declared N5 W7 G7 beside AR, prompt lookup and
# Jacobi (and, on Gemma, the assisted arm with SmolLM2 as its draft), then the CPU-tuned preset beside
# AR. Every cell writes the sweep folder "main", so the table has a model axis.
main_cells() {
    local model=$1 dataset=$2 arms='arms=[ar,lookahead,prompt_lookup,jacobi]' draft=()
    if [ "$model" = gemma3_270m ]; then
        arms='arms=[ar,lookahead,prompt_lookup,jacobi,assisted]'
        draft=("${smollm2_draft_for_gemma[@]}")  # scripts/universal_draft.sh
    fi
    # shellcheck disable=SC2046  # dataset_args prints overrides
    "$py" -m lade_bench.run +sweep=main model="$model" "${common[@]}" dataset="$dataset" $(dataset_args "$dataset") \
        dataset.limit=20 "$arms" "${draft[@]}" lookahead.window=7 lookahead.guesses=7 "${headline[@]}"
    # shellcheck disable=SC2046
    "$py" -m lade_bench.run +sweep=main model="$model" "${common[@]}" dataset="$dataset" $(dataset_args "$dataset") \
        dataset.limit=20 'arms=[ar,lookahead]' "lookahead=$(tuned_preset "$dataset")" "${headline[@]}"
}

run_group() {
    local model dataset
    case $1 in
        main:*)
            IFS=: read -r _ model dataset <<<"$1"
            main_cells "$model" "$dataset"
            ;;
        prompt_ref)  # prompt as reference off / on: 20 MT-Bench questions (both turns)
            "$py" -m lade_bench.run +sweep=prompt_ref "${smollm2[@]}" "${past_tune[@]}" dataset.limit=20 \
                max_new_tokens=256 lookahead.window=7 lookahead.guesses=7 "${headline[@]}"
            ;;
        ablation_wg)  # W x G at N=5 (corners W=1 and G=1 included), prompt as reference off: 10 questions per cell
            "$py" -m lade_bench.run +sweep=ablation_wg "${smollm2[@]}" "${past_tune[@]}" dataset.limit=10 \
                max_new_tokens=256 'lookahead.window=1,4,7' 'lookahead.guesses=1,4,7' "${headline[@]}"
            ;;
        ablation_n)  # N at W=G=4: 10 questions per cell
            "$py" -m lade_bench.run +sweep=ablation_n "${smollm2[@]}" "${past_tune[@]}" dataset.limit=10 \
                max_new_tokens=256 'lookahead.ngram=2,3,4,5' lookahead.window=4 lookahead.guesses=4 \
                report.headline.window=4 report.headline.guesses=4
            ;;
        sampling)  # greedy vs temperature 1.0 on 20 XSum articles (CNN/DailyMail is hub-only)
            "$py" -m lade_bench.run +sweep=sampling "${smollm2[@]}" dataset=xsum dataset.limit=20 max_new_tokens=128 \
                lookahead.window=7 lookahead.guesses=7 "${headline[@]}"
            ;;
    esac
}

if [ -n "$only" ]; then
    run_group "$only"
    echo "group $only done in $out; the archives and the report are written by a run without GROUP"
    exit 0
fi
for group in "${groups[@]}"; do
    run_group "$group"
done

sweeps=(main prompt_ref ablation_wg ablation_n sampling)
# Each finished sweep is archived (rows, cell records, device profiles) and the committed figures and
# tables are built from those archives, so `python -m lade_bench.report paper_figures/rows/<sweep> ...`
# on a clean checkout regenerates them (tests/report/test_committed_reference.py checks it).
for sweep in "${sweeps[@]}"; do
    "$py" -m lade_bench.results.archive "$out/$sweep" "paper_figures/rows/$sweep"
done
"$py" -m lade_bench.report "${sweeps[@]/#/paper_figures/rows/}" --out paper_figures
echo "results: paper_figures/ (figures, tables, report.html; rows/<sweep>/ holds each sweep's rows and cell records)"
