"""The account's committed table: every comparison in ``ops.csv``, one line per op in ``ops.md``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench.profiling.batch_invariance.account import COLUMNS
from lade_bench.results.atomic import atomic_write_text

OPS_CSV, OPS_MD = "ops.csv", "ops.md"
# What identifies a run's records besides the comparison itself, first in each CSV line.
RUN_COLUMNS = ("model", "dtype", "layer", "cache_tokens")
# How ops.md (and the docs quoting it) print a largest absolute difference.
DIFF_FORMAT = "{:.3g}"


def frame_of(records: Sequence[Mapping[str, Any]], run: Mapping[str, Any]) -> pd.DataFrame:
    """One run's records (``account_model``) as a frame, ``run``'s values (:data:`RUN_COLUMNS`) first."""
    frame = pd.DataFrame(list(records), columns=list(COLUMNS))
    for position, column in enumerate(RUN_COLUMNS):
        frame.insert(position, column, run[column])
    return frame


def short_name(op: str) -> str:
    """An op as ops.md names it: its module's own name (``q_proj`` for ``self_attn.q_proj``)."""
    return op.rsplit(".", 1)[-1]


def format_diff(value: float) -> str:
    """A largest absolute difference as ops.md prints it."""
    return DIFF_FORMAT.format(value)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One line per (model, dtype, path, op): the row counts k where rows differ, and the tree step."""
    lines = []
    for (model, dtype, path, op), group in frame.groupby(["model", "dtype", "path", "op"], sort=False):
        steps = group[~group["step"].str.startswith("tree")]
        tree = group[group["step"].str.startswith("tree")].iloc[0]
        differ = steps[steps["rows_differing"] > 0]
        worst = differ.loc[differ["rows_differing"].idxmax()] if len(differ) else None
        lines.append(
            {
                "model": model,
                "dtype": dtype,
                "path": path,
                "op": short_name(op),
                "k where rows differ": ", ".join(str(k) for k in differ["step_rows"]) or "none",
                "most rows differing": "-" if worst is None else f"{worst['rows_differing']} of {worst['step_rows']}",
                "max abs diff (k rows)": format_diff(differ["max_abs_diff"].max()) if len(differ) else "0",
                tree["step"]: "identical"
                if tree["rows_differing"] == 0
                else f"{tree['rows_differing']} of {tree['step_rows']} ({format_diff(tree['max_abs_diff'])})",
            }
        )
    return pd.DataFrame(lines)


def _markdown(table: pd.DataFrame) -> str:
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "---|" * len(table.columns)
    rows = ["| " + " | ".join(str(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def ops_page(frame: pd.DataFrame, about: Sequence[str]) -> str:
    """ops.md: ``about`` (the host, the command, the inputs) as a list, then the summary table."""
    listed = "\n".join(f"- {line}" for line in about)
    return (
        "# Batch invariance on the CPU, op by op\n\n"
        f"{listed}\n\n"
        "A row is the op's output for one token, computed alone (as AR's one-token step computes it) and "
        "inside a step of k rows (the k tokens after the cache, causal) or inside the lookahead tree step "
        "(its mask and positions); a row differs when any bit of it does. Every comparison, with its row "
        "count, is in ops.csv.\n\n"
        f"{_markdown(summary(frame))}\n"
    )


def write_table(frame: pd.DataFrame, about: Sequence[str], out: Path) -> None:
    """Write ``out``/ops.csv (every record, full precision) and ``out``/ops.md, each atomically."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / OPS_CSV, frame.to_csv(index=False))
    atomic_write_text(out / OPS_MD, ops_page(frame, about))
