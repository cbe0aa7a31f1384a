"""Drift of identical baseline work across the cells of a sweep: the noise floor of comparisons between cells.

Cells of one sweep whose AR arm did identical work (same model, dataset, sampling settings, seed,
precision and mode, eager or compiled; same sample turns, same number of generated tokens) would
take the same AR time per token on a quiet, stable machine; the relative spread of that time
(max - min over the median) is how much two such cells' speedups can differ from timing alone.
Cells timed on different CPUs (a sweep resumed in a later sitting on another machine) are not the
same work in this sense: their spread is the machines' difference, not drift, so each CPU is a
group of its own when the cells' CPUs are given; so is each dtype when the cells' dtypes are given.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from lade_bench.stats.modes import mode_label, row_compiled
from lade_bench.stats.units import BASELINE_ARM, ok_rows

# Columns that make two cells' AR work identical (with the sample turns and the tokens generated).
_AR_WORK = ("sweep", "model", "dataset", "do_sample", "temperature", "top_p", "top_k", "seed")


def ar_drift(
    rows: pd.DataFrame,
    cell_cpus: Mapping[tuple[str, str], str] | None = None,
    skip_cpus: frozenset[str] = frozenset(),
    cell_dtypes: Mapping[tuple[str, str], str] | None = None,
) -> pd.DataFrame:
    """Spread of AR's time per token across cells of one sweep that did identical AR work on one CPU kind.

    Args:
        rows: per-sample rows of one or more sweeps.
        cell_cpus: each cell's CPU label by ``(sweep, cell_id)`` (``report.conditions.cell_processors``);
            cells of different labels are never one group. None: the CPU is unknown (``"-"``) and
            every cell counts as one kind.
        skip_cpus: labels whose cells join no group, e.g. a cell resumed on another CPU, whose AR
            time mixes two machines.
        cell_dtypes: each cell's weights dtype by ``(sweep, cell_id)`` (from its manifest); cells of
            different dtypes are never one group, as bfloat16 AR is not float32 AR's work even when
            both stop at the same token budget. None: unknown (``"-"``), one kind.

    Returns:
        One row per group of >= 2 cells with identical AR work: the group's ``sweep``, ``model``,
        ``dataset``, ``dtype``, ``mode`` (``stats.mode_label``), ``cpu``, ``n_cells`` (the n of the spread),
        ``ar_ms_per_token_min``, ``_median``, ``_max`` and ``relative_spread`` = (max - min) / median.
        AR time per token of a cell = its AR rows' summed wall time over their summed new tokens.
    """
    columns = ["sweep", "model", "dataset", "dtype", "mode", "cpu", "n_cells", "ar_ms_per_token_min"]
    columns += ["ar_ms_per_token_median", "ar_ms_per_token_max", "relative_spread"]
    ar = ok_rows(rows[rows["arm"] == BASELINE_ARM]) if len(rows) else rows
    groups: dict[tuple, list[float]] = {}
    for (sweep, cell_id), cell in ar.groupby(["sweep", "cell_id"], sort=True):
        tokens = float(cell["new_tokens"].sum())
        key = (str(sweep), str(cell_id))
        cpu = "-" if cell_cpus is None else cell_cpus.get(key, "-")
        dtype = "-" if cell_dtypes is None else cell_dtypes.get(key, "-")
        if tokens <= 0 or cpu in skip_cpus:
            continue
        # Compiled AR is not the same work as eager AR: their times differ by the compiler, not by drift.
        mode = mode_label(row_compiled(cell).iloc[0], cell["compile_mode"].iloc[0] if "compile_mode" in cell else None)
        work = (*(cell[c].iloc[0] for c in _AR_WORK), mode, cpu, dtype)
        units = tuple(sorted(zip(cell["sample_id"].astype(str), cell["turn"], cell["repeat"], strict=True)))
        groups.setdefault((*work, units, int(tokens)), []).append(1000 * float(cell["wall_time_s"].sum()) / tokens)
    records = []
    for work, values in groups.items():
        if len(values) < 2:
            continue
        series = pd.Series(values)
        median = float(series.median())
        records.append(
            {
                "sweep": work[0],
                "model": work[1],
                "dataset": work[2],
                "dtype": work[len(_AR_WORK) + 2],
                "mode": work[len(_AR_WORK)],
                "cpu": work[len(_AR_WORK) + 1],
                "n_cells": len(values),
                "ar_ms_per_token_min": float(series.min()),
                "ar_ms_per_token_median": median,
                "ar_ms_per_token_max": float(series.max()),
                "relative_spread": (float(series.max()) - float(series.min())) / median,
            }
        )
    return pd.DataFrame.from_records(records, columns=columns)
