"""Sweep status: ``python -m lade_bench.status runs/ablation_wg [more sweep folders] [--json]``.

Shows, for each sweep folder, how many cells are done, running (with the job that owns each and its
last heartbeat), interrupted (their job died: rerun the sweep to resume them), failed (with the
error and the log), and pending; rows written against rows expected; and a rough time left. A done
cell with rows whose generation raised, or with greedy rows that differ from AR, is listed with
those counts, since its tables pair that arm with AR on fewer units than the cell ran. It only
reads results (``lade_bench.results.progress``), so it is safe to run at any time, from any machine
that sees the sweep folder, while jobs write it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from lade_bench.report.wandb_run_record import RUN_RECORD_JSON
from lade_bench.results.progress import STATES, CellProgress, SweepProgress, sweep_progress

_STYLE = {
    "done": "green",
    "running": "cyan",
    "requeued": "cyan",
    "interrupted": "yellow",
    "damaged": "magenta",
    "failed": "red",
    "refused": "red",
    "pending": "dim",
}
_HINT = {
    "requeued": "Slurm requeued their job (a preemption, a time limit, scontrol requeue) and restarts it by itself; "
    "the cell resumes at the sample in flight: nothing to do",
    "interrupted": "their job died; rerun the same command to resume them (a finished sample is never redone)",
    "damaged": "a file of a finished cell is cut or garbled; rerun the same command to repair it",
    "failed": "fix the cause, then rerun the same command: finished cells are skipped",
    "refused": "the cluster refused the launch (the message says which setting and what it offers); change the "
    "request, then rerun the same command",
}
# States shown in the headline only when a cell is in them: rare, and the headline stays as it always read.
_RARE = ("damaged", "requeued", "refused")
_FLAWED_HINT = (
    "each such arm is paired with AR only on the units both ran, and a greedy row that differs from AR breaks "
    "exactness; read the rows' 'error' and 'matches_ar' columns, fix the cause, then delete the cell's folder "
    "and rerun the same command to run it again"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the status of each sweep folder given; returns the exit status (2: a folder is missing)."""
    parser = argparse.ArgumentParser(prog="python -m lade_bench.status", description=__doc__.split("\n\n")[0])
    parser.add_argument("sweeps", nargs="+", help="sweep folder(s), e.g. runs/ablation_wg")
    parser.add_argument("--json", action="store_true", help="print the status as JSON (one object per sweep)")
    parser.add_argument("--all", action="store_true", help="list done cells too (by default only their count)")
    args = parser.parse_args(argv)
    console = Console()
    documents = []
    for folder in args.sweeps:
        try:
            progress = sweep_progress(folder, side_files=(RUN_RECORD_JSON,))
        except FileNotFoundError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.json:
            documents.append(progress.as_dict())
        else:
            render(console, progress, show_done=args.all)
    if args.json:
        print(json.dumps(documents if len(documents) > 1 else documents[0], indent=2))
    return 0


def render(console: Console, progress: SweepProgress, *, show_done: bool = False) -> None:
    """Print one sweep's status: a headline, the totals, and a table of the cells needing attention."""
    counts = progress.counts()
    planned = f", launched {progress.launch_utc}" if progress.launch_utc else ""
    console.print(f"[bold]{progress.sweep_root}[/bold] ({len(progress.cells)} cells{planned})")
    shown_states = [s for s in STATES if s not in _RARE or counts[s]]
    console.print("  " + " · ".join(f"[{_STYLE[s]}]{s} {counts[s]}[/{_STYLE[s]}]" for s in shown_states))
    console.print("  " + _totals(progress))
    for warning in progress.warnings:
        console.print(f"  [red]unreadable[/red] {warning} (rerun the same command to rebuild it)")
    flawed = progress.flawed_done_cells()
    if flawed:
        failed, mismatched = sum(c.rows_failed for c in flawed), sum(c.rows_mismatched for c in flawed)
        console.print(
            f"  [red]{len(flawed)} done cell(s) with {failed} failed row(s) and {mismatched} greedy row(s) "
            "that differ from AR[/red]"
        )
    shown = [cell for cell in progress.cells if show_done or cell.state != "done" or cell.flaws]
    if shown:
        table = Table(show_edge=False, pad_edge=False)
        for column in ("cell", "state", "rows", "job / error"):
            table.add_column(column, overflow="fold")
        order = {state: i for i, state in enumerate(STATES)}
        for cell in sorted(shown, key=lambda c: (order[c.state], c.job_num if c.job_num is not None else 1e9)):
            style = _STYLE[cell.state]
            table.add_row(cell.name, f"[{style}]{cell.state}[/{style}]", _rows(cell), _detail(cell))
        console.print(table)
    for state, hint in _HINT.items():
        if counts[state]:
            console.print(f"  [{_STYLE[state]}]{state}[/{_STYLE[state]}]: {hint}")
    if flawed:
        console.print(f"  [red]done with failed or differing rows[/red]: {_FLAWED_HINT}")


def _totals(progress: SweepProgress) -> str:
    expected = progress.rows_expected
    rows = f"rows {progress.rows_written:,} / {expected:,}" if expected else f"rows {progress.rows_written:,} / ?"
    if expected:
        rows += f" ({100 * progress.rows_written / expected:.0f}%)"
    if progress.eta_s is not None:
        running = progress.counts()["running"]
        jobs = f"{running} job(s) running" if running else "one job at a time"
        rows += f" · about {_duration(progress.eta_s)} left with {jobs} ({progress.seconds_per_row:.1f} s/row so far)"
    elif progress.counts()["done"] == len(progress.cells) and progress.cells:
        rows += " · all cells done"
    return rows


def _rows(cell: CellProgress) -> str:
    if cell.rows_expected is None:
        return f"{cell.rows_written}/?"
    return f"{cell.rows_written}/{'~' if cell.expected_is_estimate else ''}{cell.rows_expected}"


def _detail(cell: CellProgress) -> str:
    if cell.state == "running" and cell.owner is not None:
        owner = cell.owner
        job = f", job {owner['job_id']}" if owner.get("job_id") else ""
        return f"{owner.get('host')} pid {owner.get('pid')}{job}, heartbeat {cell.heartbeat_age_s:.0f} s ago"
    if cell.scheduler:  # requeued, or pending in the queue
        return cell.scheduler + (f"\nlog: {cell.log}" if cell.log and cell.state == "requeued" else "")
    if cell.state in ("failed", "damaged", "refused"):
        return f"{cell.error}" + (f"\nlog: {cell.log}" if cell.log else "")
    if cell.flaws:
        return cell.flaws + (f"\nlog: {cell.log}" if cell.log else "")
    if cell.state == "interrupted" and cell.log:
        return f"log: {cell.log}"
    return ""


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


if __name__ == "__main__":
    raise SystemExit(main())
