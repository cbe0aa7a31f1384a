"""Timing conditions in the report: which cells ran under interference, and how much identical AR work drifted.

Reads what the runner recorded in each cell's manifest (``timing_conditions``, see
``lade_bench.runner.conditions``). A cell ran under interference when any of these held during a run
that timed its rows:

* the 1-minute load average, before or after, exceeded the number of CPUs the process could use
  (its affinity): something else competed for them;
* another lade_bench or pytest process was running at its start or end;
* it resumed rows an earlier run left (a resume gap): its rows were timed at two different times.

The drift of the AR arm across cells with identical AR work is a statistic (``stats.ar_drift``);
:func:`drift_table` shows it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from lade_bench.profiling.processor import processor_label
from lade_bench.report.sweep import CellFiles

NOT_RECORDED = "timing conditions not recorded (cell recorded before they were)"
# A cell's CPU when a run did not record it, and when its runs (a resumed cell) name different CPUs.
PROCESSOR_UNRECORDED = "not recorded"
PROCESSOR_MIXED = "mixed: runs on different CPUs"


def interference(conditions: Mapping[str, Any] | None) -> list[str]:
    """Why a run of a cell was timed under interference (empty: no sign of it), from its ``timing_conditions``.

    Returns ``[NOT_RECORDED]`` when the manifest has none (cells recorded before version 2).
    """
    if not conditions:
        return [NOT_RECORDED]
    reasons = []
    cpus = conditions.get("cpu_affinity_count")
    for moment in ("start", "end"):
        snap = conditions.get(moment) or {}
        load = snap.get("load_average")
        if cpus and load and float(load[0]) > float(cpus):
            reasons.append(f"load average {float(load[0]):.2f} at the {moment} above the {cpus} CPU(s) of its affinity")
        others = snap.get("suite_processes") or []
        if others:
            pids = ", ".join(str(p.get("pid")) for p in others[:5]) + (" ..." if len(others) > 5 else "")
            reasons.append(f"{len(others)} other lade_bench/pytest process(es) at the {moment} (pid {pids})")
    gap = conditions.get("resume_gap_s")
    if gap is not None:
        reasons.append(f"resumed after a gap of {float(gap) / 60:.1f} min since its last row")
    return reasons


def cell_interference(cell: CellFiles) -> list[str]:
    """Interference reasons of every run that wrote the cell's rows (its manifest and ``previous_runs``)."""
    manifest = cell.manifest or {}
    runs = [*(manifest.get("previous_runs") or []), manifest]
    reasons: list[str] = []
    for run in runs:
        for reason in interference(run.get("timing_conditions")):
            if reason not in reasons:
                reasons.append(reason)
    return reasons


def cell_processor(manifest: Mapping[str, Any]) -> str:
    """The CPU kind that timed every run of a cell (its manifest and ``previous_runs``), as a label.

    :data:`PROCESSOR_UNRECORDED` when a run did not record it (cells before the field existed),
    :data:`PROCESSOR_MIXED` when its runs name different kinds.
    """
    runs = [*(manifest.get("previous_runs") or []), manifest]
    labels = [processor_label((run.get("timing_conditions") or {}).get("processor")) for run in runs]
    known = {label for label in labels if label is not None}
    if None in labels:
        return PROCESSOR_UNRECORDED
    return known.pop() if len(known) == 1 else PROCESSOR_MIXED


def short_processor(label: str) -> str:
    """``"AMD EPYC 25/17/1"`` of a :func:`cell_processor` label: vendor and model name, then
    family/model/stepping, without the feature flags (what a table or tick has room for)."""
    family = re.search(r"\d+/\d+/\d+", label)
    name = re.sub(r"\(R\)|\(TM\)|Processor", "", label.split(" (")[0]).split()
    return " ".join([*name[:2], *([family.group(0)] if family else [])]) or label


def cell_processors(cells: Sequence[CellFiles]) -> dict[tuple[str, str], str]:
    """:func:`cell_processor` of every cell, by ``(sweep, cell_id)`` (what ``stats.ar_drift`` groups by)."""
    return {(cell.sweep, cell.cell_id): cell_processor(cell.manifest or {}) for cell in cells}


def cell_dtypes(cells: Sequence[CellFiles]) -> dict[tuple[str, str], str]:
    """Each cell's weights dtype (``float32``, ``bfloat16``, ...) from its manifest, by ``(sweep, cell_id)``."""
    return {
        (cell.sweep, cell.cell_id): str((cell.manifest or {}).get("dtype", "-")).removeprefix("torch.")
        for cell in cells
    }


def interference_table(cells: Sequence[CellFiles], rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per cell: its CPU, affinity, threads, load before/after, and why it ran under interference.

    With the sweep's ``rows``, also how many of the cell's rows a run that left no end record timed
    (:func:`rows_without_end_record`): nothing says what ran beside such a run at its end.
    """
    records = []
    by_cell = dict(iter(rows.groupby(["sweep", "cell_id"]))) if rows is not None and len(rows) else {}
    for cell in cells:
        conditions = (cell.manifest or {}).get("timing_conditions") or {}
        start, end = conditions.get("start") or {}, conditions.get("end") or {}
        reasons = cell_interference(cell)
        records.append(
            {
                "sweep": cell.sweep,
                "cell": cell.path.name,
                "cpu": cell_processor(cell.manifest or {}),
                "cpu affinity": _cpus(conditions.get("cpu_affinity")),
                "torch threads": conditions.get("torch_threads", "-"),
                "load before": _load(start),
                "load after": _load(end),
                "interference": "; ".join(reasons) if reasons else "none seen",
                **({"rows by a run with no end record": _unended_text(cell, by_cell)} if rows is not None else {}),
            }
        )
    columns = ["sweep", "cell", "cpu", "cpu affinity", "torch threads", "load before", "load after", "interference"]
    return pd.DataFrame.from_records(
        records, columns=[*columns, *(["rows by a run with no end record"] if rows is not None else [])]
    )


def _unended_text(cell: CellFiles, by_cell: Mapping[tuple[str, str], pd.DataFrame]) -> str:
    """``"25 of 100 (run 20261205T...)"``, or ``"none"`` when every run of the cell recorded its end."""
    cell_rows = by_cell.get((cell.sweep, cell.cell_id), pd.DataFrame({"run_id": []}))
    unended = rows_without_end_record(cell.manifest or {}, cell_rows)
    if not unended:
        return "none"
    runs = ", ".join(f"{run_id}: {n}" for run_id, n in unended.items())
    return f"{sum(unended.values())} of {len(cell_rows)} ({runs})"


def drift_table(drift: pd.DataFrame) -> pd.DataFrame:
    """``stats.ar_drift`` as display strings."""
    return pd.DataFrame(
        {
            "sweep": drift["sweep"],
            "model": drift["model"],
            "dataset": drift["dataset"],
            "dtype": drift["dtype"],
            "mode": drift["mode"],
            "cpu": drift["cpu"],
            "cells (n)": drift["n_cells"],
            "AR ms/token min / median / max": [
                f"{a:.2f} / {b:.2f} / {c:.2f}"
                for a, b, c in zip(
                    drift["ar_ms_per_token_min"],
                    drift["ar_ms_per_token_median"],
                    drift["ar_ms_per_token_max"],
                    strict=True,
                )
            ],
            "relative spread": [f"{s:.1%}" for s in drift["relative_spread"]],
        }
    )


def _cpus(affinity: Any) -> str:
    if not affinity:
        return "-"
    return f"{len(affinity)}: " + ",".join(str(c) for c in affinity[:16]) + (" ..." if len(affinity) > 16 else "")


def _load(snapshot: Mapping[str, Any]) -> str:
    load = snapshot.get("load_average")
    return f"{float(load[0]):.2f}" if load else "-"


def rows_without_end_record(manifest: Mapping[str, Any], cell_rows: pd.DataFrame) -> dict[str, int]:
    """Per earlier run of a resumed cell that left no end record: how many of ``cell_rows`` it timed.

    A run killed or cut off mid-cell writes its rows but no end snapshot of the machine
    (``timing_conditions.end``), so nothing says what ran beside it at its end; the rows' ``run_id``
    names the run that timed each. Keys are those runs' ids in the order they ran (a run with no rows
    counts 0); empty for a cell every run of which recorded its end.
    """
    counts = cell_rows["run_id"].value_counts() if len(cell_rows) else pd.Series(dtype=int)
    unended = {}
    for run in [*(manifest.get("previous_runs") or []), manifest]:
        if not (run.get("timing_conditions") or {}).get("end"):
            run_id = str((run.get("run") or {}).get("run_id"))
            unended[run_id] = int(counts.get(run_id, 0))
    return unended
