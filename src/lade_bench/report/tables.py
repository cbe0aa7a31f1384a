"""The paper's tables, built from ``aggregate.summarize`` output and written as LaTeX and Markdown.

Three tables, each one function of the summary (so a notebook, the report CLI and a test get the same
strings):

* ``main_speedup``: per (model, dataset), the main cell's arms: speedup with CI, compression,
  throughput, match rate with AR (paper Table 1 / Figure 5 numbers).
* ``ablation_wg``: every greedy lookahead cell: N, W, G, prompt-as-reference, speedup, compression,
  which covers the W=1, G=1 and no-prompt-reference rows of the paper's ablation.
* ``sampling_rouge``: every sampling cell: ROUGE-1/2/L of AR and of each method, the difference in
  ROUGE-L, and the speedup (the paper's sampling quality table).

Numbers are formatted here once: speedup and compression with 2 decimals, throughput with 1,
ROUGE and match rates x100 with 2 and 1 decimals; a value that does not exist is ``n/a``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench.report import aggregate
from lade_bench.report.sweep import Sweep
from lade_bench.report.table_format import MISSING, to_latex, to_markdown
from lade_bench.results._atomic import atomic_write_text

logger = logging.getLogger(__name__)


def fmt(value: Any, decimals: int = 2, scale: float = 1.0) -> str:
    """``value * scale`` with ``decimals`` decimals; ``n/a`` for None/NaN."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return f"{float(value) * scale:.{decimals}f}"


def fmt_speedup(value: Any, low: Any, high: Any) -> str:
    """``"1.83 [1.61, 2.05]"``: speedup with its CI; ``n/a`` when not measured."""
    if fmt(value) == MISSING:
        return MISSING
    return f"{fmt(value)} [{fmt(low)}, {fmt(high)}]"


def fmt_int(value: Any) -> str:
    """An integer shape parameter, or empty when unset."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(int(value))


def arm_label(arm: str) -> str:
    """Display name of an arm (``"prompt_lookup"`` -> ``"Prompt lookup"``)."""
    return aggregate.ARM_LABELS.get(arm, arm)


def main_speedup_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Main table: the main cell per (sweep, model, dataset) (see ``aggregate.main_cells``), all arms.

    N, W and G are shown on the lookahead row only: the other arms do not use them.
    """
    rows = []
    for rec in aggregate.main_cells(summary).to_dict("records"):
        shape = rec["arm"] == "lookahead"
        rows.append(
            {
                "Model": rec["model"],
                "Dataset": rec["dataset"],
                "N": fmt_int(rec["ngram"]) if shape else "",
                "W": fmt_int(rec["window"]) if shape else "",
                "G": fmt_int(rec["guesses"]) if shape else "",
                "Method": arm_label(rec["arm"]),
                "Speedup (95% CI)": fmt_speedup(rec["speedup"], rec["speedup_ci_low"], rec["speedup_ci_high"]),
                "Compression": fmt(rec["compression_ratio"]),
                "Tokens/s": fmt(rec["tokens_per_s"], 1),
                "Matches AR (%)": "" if rec["arm"] == "ar" else fmt(rec["matches_ar"], 1, 100.0),
                "Pairs": str(rec["n_pairs"]),
            }
        )
    return pd.DataFrame(rows)


def ablation_wg_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Ablation: every greedy lookahead cell, ordered by model, dataset, N, W, G, prompt reference."""
    cells = summary[(summary["arm"] == "lookahead") & ~summary["do_sample"].astype(bool)]
    rows = [
        {
            "Model": rec["model"],
            "Dataset": rec["dataset"],
            "N": fmt_int(rec["ngram"]),
            "W": fmt_int(rec["window"]),
            "G": fmt_int(rec["guesses"]),
            "Prompt as ref.": "yes" if rec["prompt_as_reference"] else "no",
            "Tokens/step": fmt_int(rec["tokens_per_step"]),
            "Speedup (95% CI)": fmt_speedup(rec["speedup"], rec["speedup_ci_low"], rec["speedup_ci_high"]),
            "Compression": fmt(rec["compression_ratio"]),
            "Pairs": str(rec["n_pairs"]),
        }
        for rec in cells.to_dict("records")
    ]
    return pd.DataFrame(rows)


def sampling_rouge_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Sampling quality: per sampling cell, every arm's ROUGE (x100), its ROUGE-L minus AR's, speedup."""
    sampled = summary[summary["do_sample"].astype(bool)]
    rows = []
    for _, cell in sampled.groupby(list(aggregate.CELL_KEY), sort=False):
        base = cell[cell["arm"] == aggregate.BASELINE_ARM]["rougeL"]
        base_rouge_l = float(base.iloc[0]) if len(base) else math.nan
        for rec in cell.to_dict("records"):
            is_base = rec["arm"] == aggregate.BASELINE_ARM
            rows.append(
                {
                    "Model": rec["model"],
                    "Dataset": rec["dataset"],
                    "Temp.": fmt(rec["temperature"]),
                    "top-p": fmt(rec["top_p"]),
                    "top-k": fmt_int(rec["top_k"]),
                    "Method": arm_label(rec["arm"]),
                    "ROUGE-1": fmt(rec["rouge1"], 2, 100.0),
                    "ROUGE-2": fmt(rec["rouge2"], 2, 100.0),
                    "ROUGE-L": fmt(rec["rougeL"], 2, 100.0),
                    "Δ ROUGE-L": "" if is_base else fmt(rec["rougeL"] - base_rouge_l, 2, 100.0),
                    "Speedup (95% CI)": fmt_speedup(rec["speedup"], rec["speedup_ci_low"], rec["speedup_ci_high"]),
                    "Pairs": str(rec["n_pairs"]),
                }
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class PaperTable:
    """One paper table: file stem, caption, builder, and the notebook in ``notebooks/`` that writes it."""

    name: str
    caption: str
    build: Callable[[pd.DataFrame], pd.DataFrame]
    notebook: str

    @property
    def label(self) -> str:
        """LaTeX label, ``tab:<name>``."""
        return f"tab:{self.name}"


PAPER_TABLES: dict[str, PaperTable] = {
    t.name: t
    for t in (
        PaperTable(
            "main_speedup",
            "Speedup over autoregressive decoding (greedy; ratio of summed wall times, 95% paired "
            "bootstrap CI), compression (tokens per forward pass) and throughput. Per model and dataset, "
            "the cell that ran the most methods; ties broken by the highest lookahead speedup on these "
            "samples.",
            main_speedup_table,
            "main_table.py",
        ),
        PaperTable(
            "ablation_wg",
            "Lookahead ablation over N, W, G and prompt-as-reference (greedy): speedup over AR with 95% "
            "CI and compression. W=1 leaves one lookahead column; G=1 verifies one n-gram per step.",
            ablation_wg_table,
            "ablation_wg_table.py",
        ),
        PaperTable(
            "sampling_rouge",
            "Quality under sampling: ROUGE F1 (x100) of AR and of each method on the same prompts and "
            "seeds, the difference in ROUGE-L to AR, and the speedup over AR with 95% CI.",
            sampling_rouge_table,
            "sampling_rouge_table.py",
        ),
    )
}


def write_table(
    table: pd.DataFrame, out_dir: str | os.PathLike[str], spec: PaperTable, provenance: str
) -> list[Path] | None:
    """Write ``table`` as ``<out_dir>/<name>.tex`` and ``.md`` (atomically); None, logged, if empty.

    Args:
        table: display strings, as a builder returns them.
        out_dir: target folder (created).
        spec: the table's name and caption.
        provenance: one line saying where the numbers come from (no paths, no times: the files must
            be byte-identical when regenerated from the same rows).
    """
    if table.empty:
        logger.info("table %s skipped: the sweep has no cells it applies to", spec.name)
        return None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tex = out / f"{spec.name}.tex"
    md = out / f"{spec.name}.md"
    atomic_write_text(tex, to_latex(table, caption=spec.caption, label=spec.label, comment=provenance))
    atomic_write_text(md, f"<!-- {provenance} -->\n\n*{spec.caption}*\n\n{to_markdown(table)}")
    return [tex, md]


def provenance_line(sweep_label: str, n_rows: int, spec: PaperTable) -> str:
    """The provenance line of a generated table."""
    return (
        f"Generated by lade_bench.report.tables from sweep '{sweep_label}' ({n_rows} rows); "
        f"regenerate with notebooks/{spec.notebook} or python -m lade_bench.report. Do not edit."
    )


def write_paper_table(
    name: str, sweep: Sweep, out_dir: str | os.PathLike[str]
) -> tuple[pd.DataFrame, list[Path] | None]:
    """Build paper table ``name`` from a loaded sweep and write it (see :func:`write_table`).

    Args:
        name: a key of ``PAPER_TABLES``.
        sweep: the loaded sweep.
        out_dir: target folder.

    Returns:
        ``(table, written files)``; files are None when the table is empty (nothing written).

    Raises:
        KeyError: unknown table name.
    """
    try:
        spec = PAPER_TABLES[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; known: {sorted(PAPER_TABLES)}") from None
    table = spec.build(sweep.summary)
    return table, write_table(table, out_dir, spec, provenance_line(sweep.label, len(sweep.rows), spec))


def sampling_label(rec: dict[str, Any]) -> str:
    """``"greedy"`` or ``"T=0.7 p=0.9 k=50"`` for a summary record."""
    if not rec["do_sample"]:
        return "greedy"
    return f"T={rec['temperature']:g} p={rec['top_p']:g} k={int(rec['top_k'])}"


def summary_display_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Every (cell, arm) of the summary as display strings (the report's "all cells" table)."""
    rows = [
        {
            "Sweep": rec["sweep"],
            "Cell": rec["cell_id"],
            "Model": rec["model"],
            "Dataset": rec["dataset"],
            "N": fmt_int(rec["ngram"]),
            "W": fmt_int(rec["window"]),
            "G": fmt_int(rec["guesses"]),
            "Prompt ref.": "yes" if rec["prompt_as_reference"] else "no",
            "Sampling": sampling_label(rec),
            "Method": arm_label(rec["arm"]),
            "Speedup (95% CI)": fmt_speedup(rec["speedup"], rec["speedup_ci_low"], rec["speedup_ci_high"]),
            "Compression": fmt(rec["compression_ratio"]),
            "Tokens/s": fmt(rec["tokens_per_s"], 1),
            "ROUGE-L": fmt(rec["rougeL"], 2, 100.0),
            "pass@1 (%)": fmt(rec["pass@1"], 1, 100.0),
            "Accuracy (%)": fmt(rec["accuracy"], 1, 100.0),
            "Matches AR (%)": fmt(rec["matches_ar"], 1, 100.0),
            "Rows": str(rec["n_rows"]),
            "Errors": str(rec["n_errors"]),
        }
        for rec in summary.to_dict("records")
    ]
    return pd.DataFrame(rows)
