"""The report's side of the numbers: what only presentation needs.

Every number is computed by ``lade_bench.stats`` (paired units, speedup and its interval,
compression, quality, the n rules, headline selection; ``docs/statistics.md`` states the rules and
where each is implemented; arm order and labels are the method registry's, ``lade_bench.methods``).
This module asks for the summaries against AR, states the rules in a reader's words
(:func:`statistics_rules`) and flattens summaries for W&B; the report's modules read every other
statistic from ``lade_bench.stats`` directly (the step-cost model's predictions:
``report.step_cost_check``).

Array shapes: every per-sample input is a column of the rows frame (one entry per row).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from lade_bench import stats
from lade_bench.stats import (
    BOOT_SEED,
    CELL_ATTRIBUTES,
    CELL_KEY,
    CONFIDENCE,
    MIN_CI_UNITS,
    N_BOOT,
    SUMMARY_COLUMNS,
    IntervalSettings,
    plain_value,
)


def statistics_rules(min_units: int = MIN_CI_UNITS) -> tuple[str, ...]:
    """The rules of ``docs/statistics.md`` in a reader's words (the HTML report lists them)."""
    return (
        "Every number of a cell, for every method, is computed on the same units: the (sample, turn, "
        "repeat) keys at which every method of the cell succeeded. Samples = independent samples "
        "(questions), Pairs = paired keys, Errors = the method's own failed rows.",
        "Speedup under greedy decoding is the ratio of summed wall times (the outputs are identical); "
        "under sampling it is the ratio of time per generated token, because the methods produce "
        "different outputs of different lengths.",
        "95% intervals are paired percentile bootstraps that resample samples (questions), their turns "
        f"and repeats kept together. With fewer than {min_units} samples no interval is shown and the "
        "cell says so.",
        "The main table reports, per sweep, model and dataset, one cell chosen without looking at the "
        "samples it reports: the sweep's declared headline configuration, the only candidate, or the "
        "best on half A of the samples reported on half B (its Selection column says which).",
        "Mode says how a cell ran: eager, or compiled (every method on a static KV cache with "
        "torch.compile'd forwards; compile time is measured on untimed runs and left out of every time). "
        "Cells of two modes are separate rows and are never paired in a comparison.",
    )


def sorted_arms(arms: Sequence[str] | np.ndarray) -> list[str]:
    """Arms in registry order (unknown arms last, alphabetically)."""
    return stats.sorted_arms(arms)


def summarize_cell(
    cell_rows: pd.DataFrame,
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = BOOT_SEED,
    min_ci_units: int = MIN_CI_UNITS,
) -> list[dict[str, Any]]:
    """``stats.summarize_cell`` against AR, records in registry order (AR first)."""
    intervals = IntervalSettings(n_boot, confidence, seed, min_ci_units)
    return stats.summarize_cell(cell_rows, intervals=intervals)


def summarize(
    rows: pd.DataFrame,
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = BOOT_SEED,
    min_ci_units: int = MIN_CI_UNITS,
) -> pd.DataFrame:
    """Summary of every (cell, arm) in ``rows`` against AR, in registry order: the table every report draws from.

    Args:
        rows: per-sample rows as returned by ``lade_bench.results.load_rows`` (one or more sweeps).
        n_boot, confidence, seed: bootstrap settings of the speedup CI.
        min_ci_units: fewest samples a CI is computed from (see :data:`MIN_CI_UNITS`).

    Returns:
        ``stats.summarize``'s frame (``SUMMARY_COLUMNS``).
    """
    intervals = IntervalSettings(n_boot, confidence, seed, min_ci_units)
    return stats.summarize(rows, intervals=intervals)


def headline_summary(
    rows: pd.DataFrame,
    choice: pd.DataFrame,
    *,
    intervals: IntervalSettings = IntervalSettings(),
    summary: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """``stats.headline_summary`` against AR, records in registry order (``summary``: :func:`summarize`'s
    frame of the same rows and intervals, reused for cells reported on all their samples)."""
    return stats.headline_summary(rows, choice, intervals=intervals, summary=summary)


def flat_metrics(summary: pd.DataFrame) -> dict[str, float]:
    """Finite numeric metrics of one cell's summary as ``{"<arm>/<metric>": value}`` (for W&B).

    Non-finite values (a metric the dataset does not have, an interval not computed) are left out
    rather than logged as NaN; :func:`flat_notes` says why an interval is missing.
    """
    metric_columns = [c for c in SUMMARY_COLUMNS if c not in (*CELL_KEY, *CELL_ATTRIBUTES, "arm")]
    out: dict[str, float] = {}
    for rec in summary.to_dict("records"):
        for column in metric_columns:
            value = plain_value(rec[column])
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out[f"{rec['arm']}/{column}"] = value
    return out


def dataset_quality_metrics(dataset: str) -> list[str]:
    """The declared metrics (``lade_bench.metrics.registry``) computed from ``dataset``'s quality columns, in
    registry order (e.g. Spec-Bench: ROUGE, accuracy, sentence BLEU, chrF, exact match, token F1), then
    corpus BLEU where the rows keep BLEU counts; none for a dataset no longer registered."""
    from lade_bench.datasets.registry import available_datasets, get_spec
    from lade_bench.metrics.registry import METRICS

    if dataset not in available_datasets():
        return []
    columns = set(get_spec(dataset).quality_columns)
    names = [m.name for m in METRICS.values() if m.aggregation == "mean" and m.columns[0] in columns]
    # Corpus BLEU is no mean of a column: stats.quality_means sums the rows' BLEU counts.
    return [*names, stats.CORPUS_BLEU] if "bleu_stats" in columns else names


def flat_quality(rows: pd.DataFrame) -> dict[str, float]:
    """Every declared quality metric of one cell's dataset as ``{"<arm>/<metric>": value}`` (for W&B).

    The summary table's columns are fixed (committed tables keep theirs), so metrics a dataset declares
    beyond them (Spec-Bench's BLEU, chrF, exact match, token F1) come from here: ``stats.quality_means``
    on the paired rows each arm's summary numbers use. Values that cannot be computed (a category
    without that metric, no paired rows) are left out, as in :func:`flat_metrics`.
    """
    paired = stats.common_rows(rows)
    out: dict[str, float] = {}
    names = [name for dataset in sorted(set(rows["dataset"].astype(str))) for name in dataset_quality_metrics(dataset)]
    if not names:
        return out
    for arm in sorted_arms(paired["arm"].unique()):
        means = stats.quality_means(paired[paired["arm"] == arm])
        for name in dict.fromkeys(names):
            value = means.get(name, math.nan)
            if isinstance(value, (int, float)) and math.isfinite(value):
                out[f"{arm}/{name}"] = float(value)
    return out


def flat_notes(summary: pd.DataFrame) -> dict[str, str]:
    """Text that qualifies the metrics: ``<arm>/speedup_basis`` and, where set, ``<arm>/speedup_ci_note``."""
    out: dict[str, str] = {}
    for rec in summary.to_dict("records"):
        out[f"{rec['arm']}/speedup_basis"] = str(rec["speedup_basis"])
        if rec["speedup_ci_note"]:
            out[f"{rec['arm']}/speedup_ci_note"] = str(rec["speedup_ci_note"])
    return out
