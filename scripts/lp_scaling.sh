#!/usr/bin/env bash
# Lookahead parallelism vs tensor-parallel AR over the number of devices (conf/sweep/lp_scaling.yaml).
#
#   bash scripts/lp_scaling.sh OUTPUT_ROOT "DEVICE COUNTS" [HYDRA OVERRIDES...]
#   e.g. bash scripts/lp_scaling.sh runs "1 2 4 8" dataset.path=../shared/data/classeval/ClassEval_data.json
#
# One launch per device count, one after another (their timings must not overlap), all into
# OUTPUT_ROOT/lp_scaling; 1 device runs [ar, lookahead] in one process, K > 1 devices run
# [ar, lookahead, ar_tp, ar_pp] under torchrun with lookahead.devices=K (ar_pp, pipeline-parallel AR, runs
# in rank 0's process over all K GPUs while the other ranks wait; an 'arms=[...]' override given after
# the device counts wins, e.g. 'arms=[ar,lookahead,ar_tp]' on CPU, where ar_pp is refused).
# Resumable: rerun the same command and
# finished cells and samples are skipped. Then the report (figure speedup_vs_devices) is written
# into OUTPUT_ROOT/lp_scaling/report/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
    echo "usage: bash scripts/lp_scaling.sh OUTPUT_ROOT \"DEVICE COUNTS\" [HYDRA OVERRIDES...]" >&2
    exit 2
fi
out=$1
counts=$2
shift 2
py=.venv/bin/python
for devices in $counts; do
    if [ "$devices" = 1 ]; then
        "$py" -m lade_bench.run +sweep=lp_scaling output_root="$out" lookahead.devices=1 'arms=[ar,lookahead]' "$@"
    else
        "$py" -m torch.distributed.run --standalone --nproc-per-node "$devices" -m lade_bench.run +sweep=lp_scaling \
            output_root="$out" lookahead.devices="$devices" 'arms=[ar,lookahead,ar_tp,ar_pp]' "$@"
    fi
done
"$py" -m lade_bench.report "$out/lp_scaling"
