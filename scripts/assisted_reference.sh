#!/usr/bin/env bash
# Draft-model speculative decoding beside lookahead on this CPU (issue 21's measured outcome):
# Gemma-3-270M as target, SmolLM2-135M as draft through transformers' universal assisted decoding,
# against AR, lookahead (the declared N=5, W=G=7 with prompt as reference), prompt lookup and Jacobi,
# on 20 MT-Bench questions (both turns), greedy, 64 new tokens, fp32.
#
#   bash scripts/assisted_reference.sh OUTPUT_ROOT
#
# Timed work: run it on a machine doing nothing else (no tests, tuner or second sweep beside it);
# each cell records its CPU affinity, threads and the load before and after. Resumable: rerun the same
# command after a kill. It then archives the per-sample rows and cell records into
# paper_figures/assisted/rows/ and writes the tables and figures from them to paper_figures/assisted/.
# Commit them only when the run is complete and came from a clean checkout (each cell's manifest.json
# records git_dirty; tests/report/test_committed_assisted.py checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=this_checkout.sh
source scripts/this_checkout.sh
if [ $# -lt 1 ]; then
    echo "usage: bash scripts/assisted_reference.sh OUTPUT_ROOT" >&2
    exit 2
fi
out=$1
py=.venv/bin/python
# shellcheck source=universal_draft.sh
source scripts/universal_draft.sh
# The sweep file declares the headline; on this CPU it is the engine's default N=5, W=G=7.
"$py" -m lade_bench.run +sweep=assisted model=gemma3_270m "${smollm2_draft_for_gemma[@]}" lookahead=default \
    dataset.limit=20 max_new_tokens=64 device=cpu report.headline.window=7 report.headline.guesses=7 \
    output_root="$out"
# The sweep is archived (rows, cell records with their manifests, device profiles) and the tables and
# figures are built from that archive, so they can be rebuilt from the committed folder alone
# (tests/report/test_committed_assisted.py).
"$py" -m lade_bench.results.archive "$out/assisted" paper_figures/assisted/rows
"$py" -m lade_bench.report paper_figures/assisted/rows --out paper_figures/assisted
echo "results: paper_figures/assisted/ (tables, figures, report.html; rows/ holds the per-sample rows and cell records)"
