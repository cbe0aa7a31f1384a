#!/usr/bin/env bash
# Spec-Bench reference results on this CPU (issue 52): every training-free method on both embedded models
# (SmolLM2-135M-Instruct, Gemma-3-270M), 10 questions per Spec-Bench category group (mt_bench with both
# turns, translation, summarization, qa, math_reasoning, rag; dataset.per_category_limit=10 takes them in
# turn from the group's categories, kept in file order), greedy, 128 new tokens, fp32, SDPA attention.
#
#   taskset -c 0 bash scripts/spec_bench_reference.sh OUTPUT_ROOT SHARED_DATA_DIR MODEL   # one model per sitting
#   bash scripts/spec_bench_reference.sh OUTPUT_ROOT SHARED_DATA_DIR   # then: skips done cells, archives, leaderboard
#   bash scripts/spec_bench_reference.sh --models                      # list them
#
# A model's sitting runs the three cells of `+sweep=spec_bench` for it, each over every group in file order
# with its own AR on the same questions in the same process, arms alternated per question: every method at
# Spec-Bench's own N5 W7 G7 without the prompt pool (spec_bench=every_method), lookahead at the paper's 7B
# preset with the pool (paper_lookahead), and REST on the reference datastore of the model's tokenizer (rest;
# built by scripts/setup.sh). Warm state as Spec-Bench keeps it (the sweep's method_state.scope=benchmark):
# one state per stateful arm across every group, after Spec-Bench's warm-up on that state. A cell is the
# whole benchmark, so a sitting cut short (a kill, the end of the day) is a resume: rerun the same command and
# the cell goes on from its stored rows, replaying them into the states first (untimed), so every row's state
# is the uninterrupted run's. Every cell records its CPU, affinity, threads, load and resume gaps.
#
# Timed work: run it alone on the machine (no tests, tuner or second sweep beside it), pinned to one core
# (taskset -c 0) with one torch thread, as every committed CPU result is. Resume on the commit the cell
# started on (each manifest records it). The run without MODEL archives the sweep into
# paper_figures/spec_bench/rows/spec_bench/ and builds the leaderboard (tables/spec_bench_leaderboard.md,
# its figure) and report into paper_figures/spec_bench/ from that archive alone; commit them only when every
# cell is complete and ran from a clean checkout. (The committed results before issue 65 ran one cell per
# (model, group), method_state.scope=cell: each group's state started cold.)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=this_checkout.sh
source scripts/this_checkout.sh
py=.venv/bin/python
models=(smollm2 gemma3_270m)
if [ "${1:-}" = --models ]; then
    printf '%s\n' "${models[@]}"
    exit 0
fi
require_arg_count "usage: bash scripts/spec_bench_reference.sh OUTPUT_ROOT SHARED_DATA_DIR [MODEL]  (--models lists them)" $# 2 3
out=$1
questions=$2/spec_bench/question.jsonl
require_item model MODEL "${3:-}" "${models[*]}"
require_spec_bench_questions "$questions"
todo=("${models[@]}")
if [ $# -eq 3 ]; then
    todo=("$3")
fi
sweep=paper_figures/spec_bench
for model in "${todo[@]}"; do
    "$py" -m lade_bench.run +sweep=spec_bench model="$model" device=cpu output_root="$out" \
        dataset.path="$questions" dataset.per_category_limit=10 max_new_tokens=128 \
        spec_bench=every_method,paper_lookahead,rest
done
if [ $# -eq 3 ]; then
    echo "model $3 done in $out/spec_bench; the archive and the leaderboard are written by a run without MODEL"
    exit 0
fi
"$py" -m lade_bench.results.archive "$out/spec_bench" "$sweep/rows/spec_bench"
"$py" -m lade_bench.report "$sweep/rows/spec_bench" --out "$sweep"
echo "results: $sweep/ (tables/spec_bench_leaderboard.md, figures, report.html; rows/spec_bench/ holds the rows and cell records)"
