#!/usr/bin/env bash
# Runs reference groups one after another from a clean detached worktree, pinned to core 0, and after
# each group checkpoints the sweep into this checkout's sweeps_in_progress/SWEEP, committing it when the
# group is done. At DEADLINE (a `date -d` time, e.g. 05:20) the running group gets SIGINT and the chain
# stops; set it ~10 minutes before the sitting ends, so the checkpoint is saved rather than lost.
#
#   setsid nohup bash sweeps_in_progress/chain.sh DEADLINE WORKTREE RUNS_ROOT SHARED_DATA SWEEP GROUP... >> chain.log 2>&1 &
#
# Nothing else may run on the machine meanwhile (cells record other suite processes and the load).
set -uo pipefail
if [ $# -lt 6 ]; then
    echo "usage: chain.sh DEADLINE WORKTREE RUNS_ROOT SHARED_DATA SWEEP GROUP..." >&2
    exit 2
fi
deadline=$(date -d "$1" +%s) || exit 2
ref=$(realpath "$2"); runs=$3; shared=$4; sweep=$5; shift 5
main=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$(git -C "$ref" status --porcelain)" ]; then
    echo "the worktree $ref is not clean: timed results come from a clean checkout" >&2
    exit 2
fi
commit=$(git -C "$ref" rev-parse --short HEAD)
field() { lscpu | sed -n "s/^$1: *//p"; }
cpu="$(field 'Model name') family $(field 'CPU family')/$(field Model) stepping $(field Stepping)"
for group in "$@"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "$(date -u +%T) deadline reached before $group"; break; fi
    echo "$(date -u +%T) start $group (load $(cut -d' ' -f1-3 /proc/loadavg))"
    # Its own process group, so SIGINT at the deadline reaches the run itself, not only this shell; and
    # SIGINT restored to its default, because a non-interactive shell starts background jobs with it
    # ignored, and Python then never raises KeyboardInterrupt (on 2026-12-05 a group ran on for 28
    # minutes past its deadline that way).
    (cd "$ref" && export PYTHONPATH="$ref/src" && exec env --default-signal=INT setsid taskset -c 0 bash scripts/reference_results.sh "$runs" "$shared" "$group") &
    pid=$!
    interrupted=0
    while kill -0 "$pid" 2>/dev/null; do
        now=$(date +%s)
        if [ "$now" -ge "$deadline" ] && [ $interrupted = 0 ]; then
            echo "$(date -u +%T) deadline: SIGINT to $group"
            kill -INT -- -"$pid"
            interrupted=1
        elif [ $interrupted = 1 ] && [ "$now" -ge $((deadline + 120)) ]; then
            # Rows are appended whole, one per line, so a kill loses at most the row in progress.
            echo "$(date -u +%T) still running 2 minutes after SIGINT: SIGTERM to $group"
            kill -TERM -- -"$pid"
            interrupted=2
        fi
        sleep 5
    done
    wait "$pid"
    rc=$?
    echo "$(date -u +%T) end $group rc=$rc (load $(cut -d' ' -f1-3 /proc/loadavg))"
    (cd "$ref" && PYTHONPATH="$ref/src" .venv/bin/python -m lade_bench.checkpoint save "$runs/$sweep" "$main/sweeps_in_progress/$sweep")
    if [ $rc != 0 ] || [ $interrupted != 0 ]; then
        echo "$group not done: its done cells are checkpointed, not committed"
        break
    fi
    # A done cell may still hold failed rows or greedy rows that differ from AR (this checkout's status
    # counts them); such a group is checkpointed for a look, never committed as a result.
    flawed=$(cd "$main" && PYTHONPATH="$main/src" "$ref/.venv/bin/python" -c \
        'import sys; from lade_bench.results.progress import sweep_progress; print(len(sweep_progress(sys.argv[1]).flawed_done_cells()))' "$runs/$sweep")
    if [ "$flawed" != 0 ]; then
        echo "$group done, but $flawed done cell(s) hold failed or mismatched rows (python -m lade_bench.status $runs/$sweep): not committed"
        break
    fi
    git -C "$main" add -A "sweeps_in_progress/$sweep"
    git -C "$main" commit -q -m "Reference checkpoint: group $group done (sweep $sweep at $commit, clean worktree, $cpu, core 0, nothing beside it)" -- "sweeps_in_progress/$sweep" \
        && echo "committed $group"
done
echo "$(date -u +%T) chain ends"
