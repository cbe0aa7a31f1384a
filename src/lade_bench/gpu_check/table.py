"""The GPU check's summary: one record per (model, dtype, arm), as a Markdown and a terminal table."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from lade_bench.gpu_check.measure import Mismatch
from lade_bench.metrics.speed import compression_ratio, speedup, tokens_per_s
from lade_bench.runner.timing import PairedRuns

COLUMNS = (
    ("model", "model"),
    ("dtype", "dtype"),
    ("arm", "arm"),
    ("prompts", "prompts"),
    ("tokens_per_s", "tokens/s"),
    ("speedup", "speedup vs AR"),
    ("compression", "compression"),
    ("matches_ar", "matches AR"),
    ("mismatches", "mismatches"),
    ("ar_margin_median", "AR margin (median)"),
    ("arm_margin_max", "gap to AR's token (max)"),
    ("engine_errors", "engine errors"),
)


def summary_records(model: str, dtype: str, runs: PairedRuns, mismatches: Sequence[Mismatch]) -> list[dict[str, Any]]:
    """Per arm: ratios of sums against AR (speed), the match rate and the margins of the mismatches."""
    ar_times = [r.wall_time_s for r in runs.results["ar"]]
    records = []
    for arm, results in runs.results.items():
        times = [r.wall_time_s for r in results]
        tokens = [r.new_tokens for r in results]
        own = [m for m in mismatches if m.arm == arm]
        ar_margins = [m.ar_margin for m in own if not math.isnan(m.ar_margin)]
        gaps = [m.arm_margin for m in own if not math.isnan(m.arm_margin)]
        baseline = arm == "ar"
        records.append(
            {
                "model": model,
                "dtype": dtype,
                "arm": arm,
                "prompts": len(results),
                "tokens_per_s": tokens_per_s(tokens, times),
                "speedup": speedup(ar_times, times),
                "compression": compression_ratio(tokens, [r.steps for r in results]),
                "matches_ar": None if baseline else 1.0 - len(own) / len(results),
                "mismatches": None if baseline else len(own),
                "ar_margin_median": statistics.median(ar_margins) if ar_margins else None,
                "arm_margin_max": max(gaps) if gaps else None,
                "engine_errors": None if baseline else sum(m.engine_error for m in own),
            }
        )
    return records


def cell_text(key: str, value: Any) -> str:
    """A record value as the tables show it."""
    if value is None:
        return "-"
    if key == "matches_ar":
        return f"{value:.0%}"
    if key in ("speedup",):
        return f"{value:.2f}x"
    if key in ("tokens_per_s",):
        return f"{value:.1f}"
    if key == "compression":
        return f"{value:.2f}"
    if key in ("ar_margin_median", "arm_margin_max"):
        return f"{value:.3g}"
    return str(value)


def markdown_table(records: Sequence[dict[str, Any]]) -> str:
    """The records as a GitHub Markdown table."""
    lines = ["| " + " | ".join(header for _, header in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for record in records:
        lines.append("| " + " | ".join(cell_text(key, record[key]) for key, _ in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def rich_table(records: Sequence[dict[str, Any]], title: str) -> Table:
    """The records as a terminal table."""
    table = Table(title=title, title_justify="left")
    for key, header in COLUMNS:
        table.add_column(header, justify="left" if key in ("model", "dtype", "arm") else "right")
    for record in records:
        table.add_row(*(cell_text(key, record[key]) for key, _ in COLUMNS))
    return table
