#!/usr/bin/env bash
# Spec-Bench reference results on this CPU (issue 52): every training-free method on both embedded models
# (SmolLM2-135M-Instruct, Gemma-3-270M), 10 questions per Spec-Bench category group (mt_bench with both
# turns, translation, summarization, qa, math_reasoning, rag; dataset.per_category_limit=10 takes them in
# turn from the group's categories, in file order), greedy, 128 new tokens, fp32, SDPA attention.
#
#   taskset -c 0 bash scripts/spec_bench_reference.sh OUTPUT_ROOT SHARED_DATA_DIR MODEL GROUP   # one group per sitting
#   bash scripts/spec_bench_reference.sh OUTPUT_ROOT SHARED_DATA_DIR   # then: skips done cells, archives, leaderboard
#   bash scripts/spec_bench_reference.sh --groups                      # list them
#
# A group is one (model, category group): the three cells of `+sweep=spec_bench` for it, each with its own
# AR on the same questions in the same process, arms alternated per question: every method at Spec-Bench's
# own N5 W7 G7 without the prompt pool (spec_bench=every_method), lookahead at the paper's 7B preset with
# the pool (paper_lookahead), and REST on the reference datastore of the model's tokenizer (rest; built by
# scripts/setup.sh). A group's cells are compared with each other only through their own ARs, so one
# sitting per group is enough; every cell records its CPU, affinity, threads, load and resume gaps.
#
# Timed work: run it alone on the machine (no tests, tuner or second sweep beside it), pinned to one core
# (taskset -c 0) with one torch thread, as every committed CPU result is. Resumable: rerun the same
# command after a kill or in a later sitting; resume on the commit the group started on (each manifest
# records it). The run without MODEL GROUP archives the sweep into paper_figures/spec_bench/rows/spec_bench/
# and builds the leaderboard (tables/spec_bench_leaderboard.md, its figure) and report into
# paper_figures/spec_bench/ from that archive alone; commit them only when every group is complete and
# ran from a clean checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=this_checkout.sh
source scripts/this_checkout.sh
py=.venv/bin/python
models=(smollm2 gemma3_270m)
# Spec-Bench's category groups, from the dataset's own entry (lade_bench.datasets.spec_bench.GROUPS).
read -r -a category_groups <<<"$("$py" -c 'from lade_bench.datasets.spec_bench import GROUPS; print(*GROUPS)')"
groups=()
for model in "${models[@]}"; do
    for group in "${category_groups[@]}"; do
        groups+=("$model:$group")
    done
done
if [ "${1:-}" = --groups ]; then
    printf '%s\n' "${groups[@]}"
    exit 0
fi
if [ $# -ne 2 ] && [ $# -ne 4 ]; then
    echo "usage: bash scripts/spec_bench_reference.sh OUTPUT_ROOT SHARED_DATA_DIR [MODEL GROUP]  (--groups lists them)" >&2
    exit 2
fi
out=$1
questions=$2/spec_bench/question.jsonl
todo=("${groups[@]}")
if [ $# -eq 4 ]; then
    if [[ ! " ${groups[*]} " =~ " $3:$4 " ]]; then
        echo "unknown group '$3 $4': MODEL is one of ${models[*]}, GROUP one of ${category_groups[*]}" >&2
        exit 2
    fi
    todo=("$3:$4")
fi
if [ ! -f "$questions" ]; then
    echo "no Spec-Bench question file at $questions: SHARED_DATA_DIR is the folder holding spec_bench/question.jsonl" >&2
    exit 2
fi
sweep=paper_figures/spec_bench
for entry in "${todo[@]}"; do
    IFS=: read -r model group <<<"$entry"
    "$py" -m lade_bench.run +sweep=spec_bench model="$model" device=cpu output_root="$out" \
        dataset.path="$questions" dataset.per_category_limit=10 max_new_tokens=128 \
        "dataset.categories=[$group]" spec_bench=every_method,paper_lookahead,rest
done
if [ $# -eq 4 ]; then
    echo "group $3 $4 done in $out/spec_bench; the archive and the leaderboard are written by a run without MODEL GROUP"
    exit 0
fi
"$py" -m lade_bench.results.archive "$out/spec_bench" "$sweep/rows/spec_bench"
"$py" -m lade_bench.report "$sweep/rows/spec_bench" --out "$sweep"
echo "results: $sweep/ (tables/spec_bench_leaderboard.md, figures, report.html; rows/spec_bench/ holds the rows and cell records)"
