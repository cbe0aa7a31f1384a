"""The predicted leaderboard on disk: ``leaderboard.md`` (one table per profile) and ``leaderboard.csv``.

Every table is headed with what it was predicted from (``ProfileFile.heading``: device, file, model,
dtype, threads, processor, "not measured"), in the Markdown as the table's heading and in the CSV as
each record's ``heading`` column, so that no copy of a number travels without it. Both files are
written atomically: a failed write leaves an earlier prediction whole.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench.predict.leaderboard import PredictedTable
from lade_bench.report.table_format import to_markdown
from lade_bench.report.tables import ACCEPTED_HEADER, WIDTH_HEADER, fmt, fmt_int, fmt_speedup, sampling_label
from lade_bench.results.atomic import atomic_write_text

MARKDOWN_NAME = "leaderboard.md"
CSV_NAME = "leaderboard.csv"


def write_leaderboard(tables: Sequence[PredictedTable], out_dir: str | os.PathLike[str], sweep_text: str) -> list[Path]:
    """Write ``leaderboard.md`` and ``leaderboard.csv`` into ``out_dir`` (created); returns their paths.

    Args:
        tables: one per model, as ``predicted_leaderboard`` returns them.
        out_dir: the target folder.
        sweep_text: which rows were predicted (the sweep folders and their row count), for the Markdown.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    markdown, csv = out / MARKDOWN_NAME, out / CSV_NAME
    atomic_write_text(markdown, leaderboard_markdown(tables, sweep_text))
    atomic_write_text(csv, leaderboard_csv(tables))
    return [markdown, csv]


def leaderboard_markdown(tables: Sequence[PredictedTable], sweep_text: str) -> str:
    """The Markdown of every table, each under its profile's heading and its basis line."""
    parts = [
        "# Leaderboard predicted from device profiles\n",
        f"Rows: {sweep_text}. Each decode step is priced on the profile at its width and KV length, plus the "
        "row's measured time outside the forwards (lade_bench.stats.step_cost); the speedup is AR's summed "
        "predicted time over the method's (of time per token in a sampling cell), its 95% interval a paired "
        "bootstrap over samples of the predicted times. Beside it: what the rows' own device measured.\n",
    ]
    for table in tables:
        parts.append(f"## {table.profile.heading()}\n")
        parts.append(f"{basis_text(table)}\n")
        parts.append(to_markdown(display_table(table.records)))
    return "\n".join(parts)


def basis_text(table: PredictedTable) -> str:
    """What the table's predictions rest on: how KV lengths are read, and the rows without outside time."""
    basis = table.basis
    without = int(basis.get("rows_without_outside_time", 0))
    outside = (
        f"{without} of {basis.get('rows', 0)} rows recorded no forward time (AR and Hugging Face generate arms "
        "of sweeps before it was recorded), so their time outside the forwards is taken as zero"
        if without
        else f"all {basis.get('rows', 0)} rows recorded their time outside the forwards"
    )
    nothing = int(basis.get("rows_nothing_to_price", 0))
    left_out = (
        f"; {nothing} rows had nothing to price (an output that ended at the prefill's token: no decode step), "
        "so their (sample, turn) is left out of every predicted speedup of its cell"
        if nothing
        else ""
    )
    return f"Model {table.model}: {table.profile.kv_text()}; {outside}{left_out}."


def display_table(records: pd.DataFrame) -> pd.DataFrame:
    """The records as the Markdown shows them (the report's labels and number formats)."""
    bases = sorted(set(records["speedup_basis"].dropna()))
    basis = f", {bases[0]}" if len(bases) == 1 else ""
    shown: list[dict[str, Any]] = []
    for rec in records.to_dict("records"):
        shape = [fmt_int(rec[k]) for k in ("ngram", "window", "guesses")]
        shown.append(
            {
                "Dataset": rec["dataset"],
                "Cell": rec["cell_id"],
                "Sampling": sampling_label(rec),
                "Method": rec["method"],
                "N, W, G": ", ".join(shape) if rec["arm"] == "lookahead" and all(shape) else "",
                "Samples": samples_cell(rec),
                "Pairs": str(rec["n_pairs"]),
                f"Predicted speedup{basis} (95% CI)": predicted_cell(rec),
                f"Measured speedup{basis} (95% CI)": fmt_speedup(
                    rec["measured_speedup"], rec["measured_ci_low"], rec["measured_ci_high"], rec["measured_ci_note"]
                ),
                "Measured on": rec["measured_on"],
                "Outside forwards": outside_cell(rec) if math.isfinite(rec["predicted_speedup"]) else "",
                ACCEPTED_HEADER: fmt(rec["mean_accepted"]),
                WIDTH_HEADER: fmt(rec["step_tokens_mean"]),
            }
        )
    return pd.DataFrame(shown)


def samples_cell(rec: dict[str, Any]) -> str:
    """The record's samples, and the predicted estimate's where rows with nothing to price left some out."""
    predicted = rec["predicted_n_units"]
    if pd.isna(predicted) or int(predicted) == int(rec["n_units"]):
        return str(rec["n_units"])
    return f"{rec['n_units']} ({int(predicted)} predicted)"


def predicted_cell(rec: dict[str, Any]) -> str:
    """A record's predicted speedup with its interval, or why it has none (an arm no profile can price)."""
    if not math.isfinite(rec["predicted_speedup"]) and rec["predicted_ci_note"]:
        return str(rec["predicted_ci_note"])
    return fmt_speedup(
        rec["predicted_speedup"], rec["predicted_ci_low"], rec["predicted_ci_high"], rec["predicted_ci_note"]
    )


def outside_cell(rec: dict[str, Any]) -> str:
    """Whether a record's predicted times include the method's measured time outside the forwards."""
    missing = int(rec["rows_without_outside_time"])
    return "measured" if missing == 0 else f"not recorded ({missing} rows, taken as 0)"


def leaderboard_csv(tables: Sequence[PredictedTable]) -> str:
    """Every table's records as one CSV, full precision, each record carrying its heading and profile."""
    frames = []
    for table in tables:
        p = table.profile
        frames.append(
            table.records.assign(
                heading=p.heading(),
                profile=str(p.path),
                profile_device=p.device,
                profile_model=p.model,
                profile_dtype=p.dtype,
                profile_threads=p.profile.get("threads"),
                profile_processor=str(p.profile.get("processor") or ""),
                kv_measured=bool(table.basis.get("kv_measured")),
            )
        )
    buffer = io.StringIO()
    pd.concat(frames, ignore_index=True).to_csv(buffer, index=False)
    return buffer.getvalue()
