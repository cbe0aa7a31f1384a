#!/usr/bin/env bash
# Every rival method tuned for this CPU (issue 67; docs/tuning.md, "Tuning every method"): the embedded
# SmolLM2-135M-Instruct, fp32, SDPA, one torch thread, greedy, Spec-Bench questions, 16 new tokens; prompt
# lookup, Token Recycling, SuffixDecoding, SAM-Decoding, PIA and REST (on the reference datastore of the
# model's tokenizer, built by scripts/setup.sh), each over the budget its registry entry declares.
#
#   bash scripts/tune_methods_reference.sh OUTPUT_ROOT SHARED_DATA_DIR                  # (1) the search
#   bash scripts/tune_methods_reference.sh OUTPUT_ROOT SHARED_DATA_DIR --search-from paper_figures/tune/methods
#                                                                                        # (2) the held-out check
#
# (1) THE SEARCH (untimed; tune.search_only): every candidate runs on the search samples through the runner,
#     and its speedup is PREDICTED by the step-cost model from its rows (exact, so its steps do not depend on
#     timing) on the committed 1-thread profile of this host (profile-smollm2-135m-instruct-1thread.json, 2D:
#     widths 1..256 x KV 8..2048), so it may run beside other work (nice it). Each method's declared winner
#     (its top prediction) goes into paper_figures/tune/methods/methods_search.json with every candidate,
#     its prediction and the search sample ids, and the search cells' rows into search_rows/ (so every
#     prediction can be recomputed from the repo: tests/tune/test_committed_methods_search.py).
# (2) THE TIMED HELD-OUT CHECK: reuses that committed search (tune.search_from: no search runs, its winners
#     cannot change) and runs AR with every method at its authors' defaults (one cell) and at its tuned
#     settings (another) on the held-out questions, timed as ordinary cells. Run it ALONE on the machine,
#     from a clean checkout, pinned to one core (taskset -c 0). It copies the tuned leaderboard
#     (leaderboard.md / .csv), methods_record.json and the held-out cells' rows into paper_figures/tune/methods/.
#
# Sizing (SmolLM2 1-thread t(1) ~ 87 ms here, so 16 new tokens ~ 1.4 s per AR generation plus the prefill;
# measured on the shared 2-core host beside four other engineers' tests, a row of the search cost ~3.6
# CPU-seconds at 32 new tokens, and a niced process got 10-30% of a core, so 64 or 32 new tokens could not
# finish within the session: 16 new tokens, short answers whose drafts (a prompt-lookup draft of 10 tokens
# included) are cut by the budget, so the search favours shorter drafts less than a longer run would):
# dataset.per_category_limit=3 takes the first 3 questions of each of Spec-Bench's six groups, and
# tune.interleave_groups orders them one group in turn, so the 6 search samples are one per group and the
# 12 held-out samples two per group (12 >= MIN_CI_UNITS = 10: paired intervals). MT-Bench questions have two
# turns (7 search rows per arm, 14 held-out). (1) runs 39 candidates in 9 cells (each cell: AR and every
# method's i-th candidate): 9 x 7 AR + 39 x 7 method generations, about 11 CPU-minutes with the warm-ups.
# (2) runs 2 cells x 7 arms x 14 rows ~ 200 generations, about 10 minutes wall on a quiet core. Prompts above 1,900 tokens are left out
# (dataset.max_prompt_tokens), so every step's KV length stays inside the profile's 2,048.
# Resumable: rerun the same command after a kill; finished cells (and a declared search) are reused.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=this_checkout.sh
source scripts/this_checkout.sh
usage="usage: bash scripts/tune_methods_reference.sh OUTPUT_ROOT SHARED_DATA_DIR [--search-from DIR]"
require_arg_count "$usage" $# 2 4
out=$1
questions=$2/spec_bench/question.jsonl
if [ ! -f "$questions" ]; then
    echo "no Spec-Bench question file at $questions: SHARED_DATA_DIR is the folder holding spec_bench/question.jsonl" >&2
    exit 2
fi
dest=paper_figures/tune/methods
# Each cell of the sweep folder $1 (its rows, config and manifest) copied into $2/<cell>/, replacing $2:
# what the committed records are recomputed from.
copy_cell_rows() {
    rm -rf "$2"
    mkdir -p "$2"
    for cell in "$1"/*/; do
        mkdir -p "$2/$(basename "$cell")"
        cp "$cell"/rows.jsonl "$cell"/config.yaml "$cell"/manifest.json "$2/$(basename "$cell")/"
    done
}
profile=$dest/profile-smollm2-135m-instruct-1thread.json
name=smollm2-spec_bench-methods
reuse=(tune.search_only=true)
if [ $# -eq 4 ]; then
    if [ "$3" != "--search-from" ] || [ ! -f "$4/methods_search.json" ]; then
        echo "--search-from DIR: DIR must hold methods_search.json (got '$3 $4'); $usage" >&2
        exit 2
    fi
    # Copied once, before anything runs: the copy below replaces the committed record.
    mkdir -p "$out/search_from"
    [ -f "$out/search_from/methods_search.json" ] || cp "$4/methods_search.json" "$out/search_from/"
    reuse=(tune.search_from="$out/search_from/methods_search.json")
fi
export OMP_NUM_THREADS=1  # the committed profile is one thread's: the tune's device kind must match it
.venv/bin/python -m lade_bench.tune model=smollm2 device=cpu max_new_tokens=16 \
    dataset=spec_bench dataset.path="$questions" dataset.per_category_limit=3 dataset.shuffle_seed=null \
    dataset.max_prompt_tokens=1900 \
    'tune.methods=[prompt_lookup,token_recycling,suffix_decoding,sam_decoding,pia,rest]' \
    tune.probe_samples=6 tune.heldout_samples=12 tune.interleave_groups=true \
    tune.profile_from="$profile" tune.output_root="$out/tune" tune.name="$name" "${reuse[@]}"
mkdir -p "$dest"
if [ $# -eq 2 ]; then
    cp "$out/tune/$name/methods_search.json" "$dest/"
    copy_cell_rows "$out/tune/$name/search" "$dest/search_rows"
    echo "search record in $dest/methods_search.json; the timed held-out check: $0 $out $2 --search-from $dest"
else
    cp "$out/tune/$name/leaderboard.md" "$out/tune/$name/leaderboard.csv" "$out/tune/$name/methods_record.json" "$dest/"
    copy_cell_rows "$out/tune/$name/heldout" "$dest/heldout_rows"
    echo "tuned leaderboard in $dest/leaderboard.md (record, held-out rows beside it)"
fi
