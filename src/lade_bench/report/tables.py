"""The paper's tables, built from a loaded sweep's aggregates and written as LaTeX and Markdown.

Four tables, each one function of a :class:`~lade_bench.report.sweep.Sweep` (so a notebook, the
report CLI and a test get the same strings):

* ``main_speedup``: per (sweep, model, dataset, mode), the headline cell's arms (``stats.choose_headline``:
  declared in advance, the only candidate, or selected on half A of the samples and reported on half
  B, as its Selection column says): speedup with CI, compression, throughput, match rate with AR
  (paper Table 1 / Figure 5 numbers), and the outputs' text health: repeated 4-grams, distinct-4, loops
  and the speedup on the samples whose AR output ends in no loop (``stats.text_health``).
* ``ablation_wg``: every greedy lookahead cell: N, W, G, prompt-as-reference, speedup, compression,
  which covers the W=1, G=1 and no-prompt-reference rows of the paper's ablation.
* ``sampling_rouge``: every sampling cell: ROUGE-1/2/L of AR and of each method, the paired difference
  in ROUGE-L with its CI, and the speedup per token (the paper's sampling quality table).
* ``knob_contrasts``: what one setting (N, W, G, prompt as reference) changes, paired: two cells that
  differ in it only, their speedups and compressions on the samples both ran, and the ratio of each
  with its CI (``stats.knob_contrasts``); the table a claim about a trend across cells rests on.

Every table names each cell's mode (Mode: ``eager``, or ``compiled (<torch.compile mode>)``): every
arm of a cell runs in its mode, and cells of two modes are never compared with each other.

Every row carries its n: Samples (independent units of every interval), Pairs (paired (sample, turn,
repeat) keys behind every number) and Errors (the method's own failed rows). A CI is printed only
from at least ``stats.MIN_CI_UNITS`` samples; otherwise the point estimate is followed by the
reason, e.g. ``0.54 (no interval: 3 samples (< 10))``.

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

from lade_bench import stats
from lade_bench.methods import method_label, method_state_text
from lade_bench.report.conditions import cell_dtypes, cell_processors, short_processor
from lade_bench.report.sweep import Sweep
from lade_bench.report.table_format import MISSING, to_latex, to_markdown
from lade_bench.results.atomic import atomic_write_text

logger = logging.getLogger(__name__)

# Column headers that name what the speedup is a ratio of (``stats.speedup_basis``).
SPEEDUP_HEADER = {
    stats.BASIS_WALL_TIME: "Speedup, wall time (95% CI)",
    stats.BASIS_PER_TOKEN: "Speedup per token (95% CI)",
}
# Flat (the paper's G chains) or trie verification; shown only in tables where some cell uses a trie.
VERIFICATION_HEADER = "Verification"
# The share of a method's wall time spent in its draft model's forwards (assisted generation).
DRAFT_SHARE_HEADER = "Draft time (%)"
# Eager or compiled (static KV cache, torch.compile'd forwards): shown in every table, eager included,
# since a speedup over eager AR and one over compiled AR are different claims.
MODE_HEADER = "Mode"
# The CPU kind that timed a cell (family/model/stepping), shown when a table's cells ran on several.
CPU_HEADER = "CPU"
# The mean over samples of each sample's speedup: the estimator beside the ratio of sums.
PER_SAMPLE_HEADER = "Per-sample mean"
# The dataset's own quality metric (pass@1, accuracy or ROUGE-L) on the paired units.
QUALITY_HEADER = "Quality"
# Outputs (sample, turn) that stopped at max_new_tokens, of the paired ones.
AT_CAP_HEADER = "At cap"
# Text health of the paired outputs (lade_bench.metrics.text_health): mean repeated-4-gram share and
# distinct-4, outputs ending in a loop, and the speedup on the units whose AR output ends in no loop.
REPEATED_HEADER = "Repeated 4-grams (%)"
DISTINCT_HEADER = "Distinct-4"
LOOPS_HEADER = "Loops"
NO_LOOP_HEADER = "Speedup without loops (95% CI; samples)"
# Seconds of untimed compile runs before a method's rows (compiled cells; never part of a time).
COMPILE_TIME_HEADER = "Compile time (s)"
# Why a method wins or loses on a device: tokens accepted per decode step (Spec-Bench's tau) against
# the tokens a step feeds (what it costs on the device profile).
ACCEPTED_HEADER = "Accepted/step"
WIDTH_HEADER = "Width/step"
# How warm a method's carried state was (lade_bench.methods.state): the fewest and most earlier
# requests it had learnt from at its rows' starts, or "static" for a state no request changes (REST's
# datastore); shown only where some method keeps state.
STATE_HEADER = "State (earlier requests)"


def fmt(value: Any, decimals: int = 2, scale: float = 1.0) -> str:
    """``value * scale`` with ``decimals`` decimals; ``n/a`` for None/NaN."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return f"{float(value) * scale:.{decimals}f}"


def fmt_estimate(value: Any, low: Any, high: Any, note: Any = "", decimals: int = 2, scale: float = 1.0) -> str:
    """``"1.83 [1.61, 2.05]"``, or ``"0.54 (no interval: 3 samples (< 10))"`` when ``note`` says why not.

    ``n/a`` when there is no value.
    """
    point = fmt(value, decimals, scale)
    if point == MISSING:
        return MISSING
    if note:
        return f"{point} ({note})"
    if fmt(low) == MISSING or fmt(high) == MISSING:
        return point
    return f"{point} [{fmt(low, decimals, scale)}, {fmt(high, decimals, scale)}]"


def fmt_speedup(value: Any, low: Any, high: Any, note: Any = "") -> str:
    """A speedup with its CI or the reason it has none (see :func:`fmt_estimate`)."""
    return fmt_estimate(value, low, high, note)


def fmt_int(value: Any) -> str:
    """An integer shape parameter, or empty when unset."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(int(value))


def arm_label(arm: str) -> str:
    """Display name of an arm (``"prompt_lookup"`` -> ``"Prompt lookup"``)."""
    return method_label(arm)


def selection_label(rec: dict[str, Any]) -> str:
    """How a headline cell was chosen, for the Selection column (``"best of 16 on half A"``)."""
    if rec["selection"] == stats.SELECTION_SPLIT:
        return f"best of {int(rec['n_candidates'])} on half A"
    return str(rec["selection"])


def mode_cell(rec: dict[str, Any]) -> str:
    """A record's mode as every table shows it: ``"eager"`` or ``"compiled (default)"``."""
    return stats.mode_label(rec.get("compiled"), rec.get("compile_mode"))


def compile_time_cell(rec: dict[str, Any]) -> str:
    """Seconds of a method's untimed compile runs (1 decimal); empty in an eager cell."""
    text = fmt(rec.get("compile_time_s"), 1)
    return "" if text == MISSING else text


def counts(rec: dict[str, Any]) -> dict[str, str]:
    """The n of a record: Samples, Pairs and Errors columns."""
    return {"Samples": str(rec["n_units"]), "Pairs": str(rec["n_pairs"]), "Errors": str(rec["n_errors"])}


def speedup_cell(rec: dict[str, Any]) -> str:
    """A record's speedup as shown in every table."""
    return fmt_speedup(rec["speedup"], rec["speedup_ci_low"], rec["speedup_ci_high"], rec["speedup_ci_note"])


def mismatch_cell(rec: dict[str, Any]) -> str:
    """Greedy mismatches with their margins, e.g. ``"2 (AR margin 0.031, gap <= 0.05)"``; engine errors named.

    Empty for AR and sampled cells. "AR margin" is the median top-1 minus top-2 logit at the first
    divergent position (small: near-ties), "gap" the largest distance between AR's token and the
    arm's there (what ``mismatch.margin_tolerance`` judges).
    """
    n = rec.get("mismatches")
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return ""
    if int(n) == 0:
        return "0"
    parts = []
    if _finite(rec.get("ar_margin_median")):
        parts.append(f"AR margin {rec['ar_margin_median']:.3g}")
    if _finite(rec.get("arm_margin_max")):
        parts.append(f"gap <= {rec['arm_margin_max']:.3g}")
    text = f"{int(n)}" + (f" ({', '.join(parts)})" if parts else "")
    errors = int(rec.get("engine_errors") or 0)
    if errors:
        text += f"; {errors} ENGINE ERROR{'S' if errors > 1 else ''}"
    return text


def at_cap_cell(rec: dict[str, Any]) -> str:
    """Outputs that stopped at ``max_new_tokens``, of the paired ones, e.g. ``"12/40"``; ``n/a`` if unrecorded."""
    if not _finite(rec.get("n_at_cap")):
        return MISSING
    return f"{int(rec['n_at_cap'])}/{rec['n_pairs']}"


def loops_cell(rec: dict[str, Any]) -> str:
    """Outputs ending in an exact loop, of the paired ones, e.g. ``"38/70"``; ``n/a`` where not measured."""
    if not _finite(rec.get("n_loops")):
        return MISSING
    return f"{int(rec['n_loops'])}/{rec['n_pairs']}"


def no_loop_speedup_cell(rec: dict[str, Any]) -> str:
    """The speedup on the units whose AR output ends in no loop, with its interval and its samples."""
    if not _finite(rec.get("n_units_no_loop")) or not rec["n_units_no_loop"]:
        return MISSING
    value = fmt_speedup(
        rec["speedup_no_loop"],
        rec["speedup_no_loop_ci_low"],
        rec["speedup_no_loop_ci_high"],
        rec["speedup_no_loop_ci_note"],
    )
    return f"{value}; {int(rec['n_units_no_loop'])}"


def text_health_cells(rec: dict[str, Any]) -> dict[str, str]:
    """The text-health columns of a (cell, arm) record as every speedup table shows them."""
    return {
        REPEATED_HEADER: fmt(rec.get("repeated_4gram_share"), 1, 100.0),
        DISTINCT_HEADER: fmt(rec.get("distinct_4")),
        LOOPS_HEADER: loops_cell(rec),
        NO_LOOP_HEADER: no_loop_speedup_cell(rec),
    }


# The quality metric a dataset's rows carry, in the order tried, with how it is printed (x100).
QUALITY_METRICS = (("pass@1", "pass@1", "%"), ("accuracy", "accuracy", "%"), ("rougeL", "ROUGE-L", ""))


def quality_cell(rec: dict[str, Any]) -> str:
    """The dataset's own quality metric on the paired units, e.g. ``"pass@1 5.0%"``; empty when it has none."""
    for column, label, unit in QUALITY_METRICS:
        if _finite(rec.get(column)):
            return f"{label} {fmt(rec[column], 1 if unit else 2, 100.0)}{unit}"
    return ""


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def cpu_per_cell(sweep: Sweep, records: pd.DataFrame) -> dict[tuple[str, str], str]:
    """The CPU kind of each cell of ``records``, by ``(sweep, cell_id)``, when they ran on more than one
    kind (then a table shows it per cell: speedups do not transfer between kinds); empty otherwise."""
    processors = cell_processors(sweep.cells)
    keys = {(str(s), str(c)) for s, c in zip(records["sweep"], records["cell_id"], strict=True)}
    kinds = {key: short_processor(processors.get(key, "unrecorded")) for key in keys}
    return kinds if len(set(kinds.values())) > 1 else {}


def main_speedup_table(sweep: Sweep) -> pd.DataFrame:
    """Main table: the headline cell per (sweep, model, dataset, mode) (see ``stats.choose_headline``), all arms.

    Numbers are those of ``sweep.headline``: for a cell selected on half A, half B's only. N, W and G
    are shown on the lookahead row only: the other arms do not use them. A CPU column names each
    cell's CPU kind when the cells ran on more than one.
    """
    rows = []
    cpu = cpu_per_cell(sweep, sweep.headline)
    for rec in sweep.headline.to_dict("records"):
        shape = rec["arm"] == "lookahead"
        rows.append(
            {
                "Sweep": rec["sweep"],
                "Model": rec["model"],
                "Dataset": sweep.dataset_text(rec),
                **({CPU_HEADER: cpu[(str(rec["sweep"]), str(rec["cell_id"]))]} if cpu else {}),
                MODE_HEADER: mode_cell(rec),
                "Selection": selection_label(rec),
                "N": fmt_int(rec["ngram"]) if shape else "",
                "W": fmt_int(rec["window"]) if shape else "",
                "G": fmt_int(rec["guesses"]) if shape else "",
                VERIFICATION_HEADER: rec.get("verification") if shape else "",
                "Method": sweep.record_label(rec),
                SPEEDUP_HEADER[stats.BASIS_WALL_TIME]: speedup_cell(rec),
                PER_SAMPLE_HEADER: fmt(rec["speedup_per_sample_mean"]),
                "Compression": fmt(rec["compression_ratio"]),
                "Tokens/s": fmt(rec["tokens_per_s"], 1),
                DRAFT_SHARE_HEADER: draft_share_cell(rec),
                STATE_HEADER: state_cell(rec),
                "Matches AR (%)": "" if rec["arm"] == "ar" else fmt(rec["matches_ar"], 1, 100.0),
                "Mismatches (margins)": mismatch_cell(rec),
                QUALITY_HEADER: quality_cell(rec),
                AT_CAP_HEADER: at_cap_cell(rec),
                **text_health_cells(rec),
                **counts(rec),
            }
        )
    return without_empty_state(without_empty_draft_share(without_flat_only_verification(pd.DataFrame(rows))))


def ablation_wg_table(sweep: Sweep) -> pd.DataFrame:
    """Ablation: every greedy lookahead cell, ordered by sweep, model, dataset, N, W, G, prompt reference."""
    summary = sweep.summary
    cells = summary[(summary["arm"] == "lookahead") & ~summary["do_sample"].astype(bool)]
    cpu = cpu_per_cell(sweep, cells)
    rows = [
        {
            "Sweep": rec["sweep"],
            "Model": rec["model"],
            "Dataset": sweep.dataset_text(rec),
            **({CPU_HEADER: cpu[(str(rec["sweep"]), str(rec["cell_id"]))]} if cpu else {}),
            MODE_HEADER: mode_cell(rec),
            "N": fmt_int(rec["ngram"]),
            "W": fmt_int(rec["window"]),
            "G": fmt_int(rec["guesses"]),
            "Prompt as ref.": "yes" if rec["prompt_as_reference"] else "no",
            VERIFICATION_HEADER: rec.get("verification"),
            # Flat: (W + G)(N - 1); trie: the measured mean per decode step (not a whole number).
            "Tokens/step": (
                fmt_int(rec["tokens_per_step"]) if rec.get("verification") == "flat" else fmt(rec["tokens_per_step"], 1)
            ),
            SPEEDUP_HEADER[stats.BASIS_WALL_TIME]: speedup_cell(rec),
            "Compression": fmt(rec["compression_ratio"]),
            AT_CAP_HEADER: at_cap_cell(rec),
            **text_health_cells(rec),
            **counts(rec),
        }
        for rec in cells.to_dict("records")
    ]
    return without_flat_only_verification(pd.DataFrame(rows))


def sampling_rouge_table(sweep: Sweep) -> pd.DataFrame:
    """Sampling quality: per sampling cell, every arm's ROUGE (x100), its paired ROUGE-L minus AR's, speedup.

    All arms of a cell are scored on the same paired units, so the difference column is the
    difference of the ROUGE-L column; its CI resamples samples.
    """
    summary = sweep.summary
    sampled = summary[summary["do_sample"].astype(bool)]
    rows = []
    for (sweep_name, cell_id), cell in sampled.groupby(list(stats.CELL_KEY), sort=False):
        cell_rows = sweep.rows[(sweep.rows["sweep"] == sweep_name) & (sweep.rows["cell_id"] == cell_id)]
        paired = stats.common_rows(cell_rows)
        for rec in cell.to_dict("records"):
            is_base = rec["arm"] == stats.BASELINE_ARM
            delta = stats.quality_delta(paired, rec["arm"], "rougeL", intervals=sweep.intervals)
            rows.append(
                {
                    "Sweep": rec["sweep"],
                    "Model": rec["model"],
                    "Dataset": sweep.dataset_text(rec),
                    MODE_HEADER: mode_cell(rec),
                    "Temp.": fmt(rec["temperature"]),
                    "top-p": fmt(rec["top_p"]),
                    "top-k": fmt_int(rec["top_k"]),
                    "Method": sweep.record_label(rec),
                    "ROUGE-1": fmt(rec["rouge1"], 2, 100.0),
                    "ROUGE-2": fmt(rec["rouge2"], 2, 100.0),
                    "ROUGE-L": fmt(rec["rougeL"], 2, 100.0),
                    "Δ ROUGE-L (95% CI)": ""
                    if is_base
                    else fmt_estimate(delta.value, delta.low, delta.high, delta.note, 2, 100.0),
                    SPEEDUP_HEADER[stats.BASIS_PER_TOKEN]: speedup_cell(rec),
                    AT_CAP_HEADER: at_cap_cell(rec),
                    **counts(rec),
                }
            )
    return pd.DataFrame(rows)


# How the contrast table names a setting and prints its levels.
KNOB_LABELS = {"ngram": "N", "window": "W", "guesses": "G", "prompt_as_reference": "prompt as ref."}


def _knob_level(knob: str, level: Any) -> str:
    if knob == "prompt_as_reference":
        return "on" if bool(level) else "off"
    return fmt_int(level)


def _ratio_cell(rec: dict[str, Any], column: str) -> str:
    # A contrast record holds each ratio as <column>, <column>_ci_low, _ci_high and _ci_note.
    return fmt_estimate(rec[column], rec[f"{column}_ci_low"], rec[f"{column}_ci_high"], rec[f"{column}_ci_note"])


def knob_contrasts_table(sweep: Sweep) -> pd.DataFrame:
    """Paired contrasts of one setting (``stats.knob_contrasts``): greedy lookahead cells of one sweep that
    differ in one of N, W, G or prompt-as-reference, at adjacent levels, on the samples both ran.

    Cells are compared only on one CPU kind and dtype (from their manifests).
    """
    processors, dtypes = cell_processors(sweep.cells), cell_dtypes(sweep.cells)
    labels = {key: f"{processors[key]} {dtypes.get(key, '-')}" for key in processors}
    contrasts = stats.knob_contrasts(sweep.summary, sweep.rows, cell_labels=labels, intervals=sweep.intervals)
    rows = [
        {
            "Sweep": rec["sweep"],
            "Model": rec["model"],
            "Dataset": sweep.dataset_text({**rec, "cell_id": rec["cell_from"]}),
            MODE_HEADER: rec["mode"],
            "Change": f"{KNOB_LABELS[rec['knob']]} {_knob_level(rec['knob'], rec['level_from'])} -> "
            f"{_knob_level(rec['knob'], rec['level_to'])}",
            "Held": rec["fixed"],
            "Speedup before": fmt(rec["speedup_from"]),
            "Speedup after": fmt(rec["speedup_to"]),
            "Speedup after / before (95% CI)": _ratio_cell(rec, "speedup_ratio"),
            "Compression before": fmt(rec["compression_from"]),
            "Compression after": fmt(rec["compression_to"]),
            "Compression after / before (95% CI)": _ratio_cell(rec, "compression_ratio"),
            "Samples": str(rec["n_units"]),
            "Pairs": str(rec["n_pairs"]),
        }
        for rec in contrasts.to_dict("records")
    ]
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class PaperTable:
    """One paper table: file stem, caption, builder, and the notebook in ``notebooks/`` that writes it
    (empty: ``build_report`` writes it, no notebook does)."""

    name: str
    caption: str
    build: Callable[[Sweep], pd.DataFrame]
    notebook: str = ""

    @property
    def label(self) -> str:
        """LaTeX label, ``tab:<name>``."""
        return f"tab:{self.name}"


# What every caption says about n and intervals (kept true by aggregate's rules).
# What the text-health columns of a speedup table mean (lade_bench.metrics.text_health, docs/statistics.md).
_TEXT_HEALTH_NOTE = (
    "Repeated 4-grams = the mean share of an output's token 4-grams that repeat an earlier one (100 - "
    "distinct-4 x 100); Loops = outputs that end in an exact repeating loop (>= 2 periods, >= 16 tokens); "
    "Speedup without loops = the same paired speedup on the samples whose AR output ends in no loop "
    "(chosen by AR's output, so every method is compared on the same samples), with their number. "
)
_N_NOTE = (
    "All methods of a cell are measured on the same (sample, turn, repeat) units, those where every "
    "method succeeded; Samples = independent samples (the unit every CI resamples, turns and repeats "
    "kept together), Pairs = paired units, Errors = the method's failed rows. A 95% paired bootstrap "
    f"CI is shown only from enough samples ({stats.MIN_CI_UNITS} unless the report was told "
    "otherwise); below that the cell gives the point estimate and the reason, e.g. 'no interval: 3 "
    "samples (< 10)'. At cap = outputs (sample, turn) that stopped at max_new_tokens instead of ending "
    "by themselves, of the paired ones (n/a for rows that did not record their budget)."
)

PAPER_TABLES: dict[str, PaperTable] = {
    t.name: t
    for t in (
        PaperTable(
            "main_speedup",
            "Speedup over autoregressive decoding (greedy; ratio of summed wall times on identical "
            "outputs), compression (tokens per forward pass) and throughput. One cell per sweep, model, "
            "dataset and mode (Mode: eager, or compiled = static KV cache and torch.compile'd forwards for "
            "every method of the cell, compile time excluded), never chosen on the samples it reports. "
            "Selection: 'declared' = the "
            "configuration the sweep declared before running (report.headline); 'only candidate' = the "
            "one greedy cell with the most methods (prompt as reference preferred); 'best of k on half "
            "A' = the highest lookahead speedup among k cells on half A of the samples (split by a hash "
            "of the sample id), with every number shown measured on the other half B only. Per-sample "
            "mean = the mean over samples of each sample's speedup, the other estimator: where it and "
            "the ratio of sums fall on opposite sides of 1, neither alone says whether the method is "
            "faster. Quality = the "
            "dataset's own metric on the paired units: pass@1 of the sandboxed unit tests, exact-match "
            "accuracy, or ROUGE-L F1 (x100); none for MT-Bench, which is judged by an LLM. "
            + _TEXT_HEALTH_NOTE
            + _N_NOTE,
            main_speedup_table,
            "main_table.py",
        ),
        PaperTable(
            "ablation_wg",
            "Lookahead ablation over N, W, G and prompt-as-reference (greedy): speedup over AR (ratio "
            "of summed wall times) and compression, every cell of the sweep (no selection). W=1 leaves "
            "one lookahead column; G=1 verifies one n-gram per step. " + _TEXT_HEALTH_NOTE + _N_NOTE,
            ablation_wg_table,
            "ablation_wg_table.py",
        ),
        PaperTable(
            "sampling_rouge",
            "Quality under sampling: ROUGE F1 (x100) of AR and of each method on the same prompts and "
            "seeds (the units where every method succeeded), the paired difference in ROUGE-L to AR, "
            "and the speedup per token over AR: the ratio of time per generated token, since sampled "
            "outputs differ in length between methods. " + _N_NOTE,
            sampling_rouge_table,
            "sampling_rouge_table.py",
        ),
        PaperTable(
            "knob_contrasts",
            "What one lookahead setting changes, paired (greedy): every two cells of a sweep that differ "
            "in one of N, W, G or prompt as reference, at adjacent levels, with everything else equal "
            "(model, dataset, output length, seed, mode, CPU kind, dtype); no cell is chosen on its "
            "results. Both cells are measured on the (sample, turn, repeat) units both paired; each "
            "cell's speedup is over its own AR arm, timed beside it, so a machine that ran faster for one "
            "cell than the other moves both its arms alike and divides out. After / before = the ratio "
            "of the two speedups (above 1: the change made lookahead faster), and of the two "
            "compressions; its 95% bootstrap CI resamples samples with their totals in both cells "
            "together, shown only from enough samples "
            f"({stats.MIN_CI_UNITS} unless the report was told otherwise). Samples = the independent "
            "units every CI resamples, Pairs = the paired units behind each number.",
            knob_contrasts_table,
            "knob_contrasts_table.py",
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
    table = spec.build(sweep)
    return table, write_table(table, out_dir, spec, provenance_line(sweep.label, len(sweep.rows), spec))


def sampling_label(rec: dict[str, Any]) -> str:
    """``"greedy"`` or ``"T=0.7 p=0.9 k=50"`` for a summary record."""
    if not rec["do_sample"]:
        return "greedy"
    return f"T={rec['temperature']:g} p={rec['top_p']:g} k={int(rec['top_k'])}"


def draft_share_cell(rec: dict[str, Any]) -> str:
    """The draft's share of wall time in percent; empty for a method without a draft model."""
    share = rec.get("draft_time_share")
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return ""
    return fmt(share, 1, 100.0)


def state_cell(rec: dict[str, Any]) -> str:
    """``"0-39"``: the fewest and most earlier requests a stateful method's state had seen (warm when
    the most grows with the samples, cold when it stays at the turn count); ``"static"`` for a state no
    request changes (REST's datastore); empty for a stateless method (``methods.method_state_text``)."""
    return method_state_text(str(rec["arm"]), None, rec.get("state_requests_min"), rec.get("state_requests_max"))


def without_empty_state(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the state column when no method in it keeps state across requests."""
    if STATE_HEADER in table and set(table[STATE_HEADER]) <= {"", None}:
        return table.drop(columns=STATE_HEADER)
    return table


def without_empty_draft_share(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the draft-time column when no method in it runs a draft model."""
    if DRAFT_SHARE_HEADER in table and set(table[DRAFT_SHARE_HEADER]) <= {"", None}:
        return table.drop(columns=DRAFT_SHARE_HEADER)
    return table


def without_flat_only_verification(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without its verification column when no cell uses anything but the paper's flat
    layout (the column would only repeat "flat")."""
    if VERIFICATION_HEADER in table and set(table[VERIFICATION_HEADER]) <= {"flat", "", None}:
        return table.drop(columns=VERIFICATION_HEADER)
    return table


def summary_display_table(
    summary: pd.DataFrame,
    label_of: Callable[[dict[str, Any]], str] | None = None,
    dataset_of: Callable[[dict[str, Any]], str] | None = None,
) -> pd.DataFrame:
    """Every (cell, arm) of the summary as display strings (the report's "all cells" table).

    Args:
        label_of: a record -> its Method text (``Sweep.record_label``: the configuration that ran);
            None: the method's plain label.
        dataset_of: a record -> its Dataset text (``Sweep.dataset_text``: with the groups a cell ran);
            None: the dataset column.
    """
    label_of = label_of or (lambda rec: arm_label(rec["arm"]))
    dataset_of = dataset_of or (lambda rec: str(rec["dataset"]))
    rows = [
        {
            "Sweep": rec["sweep"],
            "Cell": rec["cell_id"],
            "Model": rec["model"],
            "Dataset": dataset_of(rec),
            MODE_HEADER: mode_cell(rec),
            "N": fmt_int(rec["ngram"]),
            "W": fmt_int(rec["window"]),
            "G": fmt_int(rec["guesses"]),
            "Prompt ref.": "yes" if rec["prompt_as_reference"] else "no",
            VERIFICATION_HEADER: rec.get("verification"),
            "Sampling": sampling_label(rec),
            "Method": label_of(rec),
            "Speedup (95% CI)": speedup_cell(rec),
            "Speedup of": rec["speedup_basis"],
            "Compression": fmt(rec["compression_ratio"]),
            ACCEPTED_HEADER: fmt(rec["mean_accepted"]),
            WIDTH_HEADER: fmt(rec["step_tokens_mean"], 1),
            STATE_HEADER: state_cell(rec),
            "Tokens/s": fmt(rec["tokens_per_s"], 1),
            COMPILE_TIME_HEADER: compile_time_cell(rec),
            "ROUGE-L": fmt(rec["rougeL"], 2, 100.0),
            "pass@1 (%)": fmt(rec["pass@1"], 1, 100.0),
            "Accuracy (%)": fmt(rec["accuracy"], 1, 100.0),
            "Matches AR (%)": fmt(rec["matches_ar"], 1, 100.0),
            "Mismatches (margins)": mismatch_cell(rec),
            "Rows": str(rec["n_rows"]),
            **counts(rec),
        }
        for rec in summary.to_dict("records")
    ]
    table = without_empty_state(without_flat_only_verification(pd.DataFrame(rows)))
    if COMPILE_TIME_HEADER in table and set(table[COMPILE_TIME_HEADER]) <= {""}:
        return table.drop(columns=COMPILE_TIME_HEADER)  # no compiled cell: the column would be empty
    return table
