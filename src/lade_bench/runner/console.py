"""What a person sees: a progress bar while a cell runs and a summary table when it ends."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console, JustifyMethod
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from lade_bench.methods import STANDARD_PATH_REFERENCE, method_state_text
from lade_bench.methods.state import SCOPE_BEFORE, STATE_SECTION


@contextlib.contextmanager
def progress_bar(total: int, title: str) -> Iterator[Callable[[str], None]]:
    """A progress bar on stderr over ``total`` units; yields ``advance(description)``.

    On a terminal it redraws in place; in a log file (no terminal) rich prints it once at the end,
    so captured output stays short.
    """
    columns = (
        TextColumn("[bold]{task.fields[title]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        task = progress.add_task("", total=total, title=title)

        def advance(description: str) -> None:
            progress.update(task, advance=1, description=description)

        yield advance


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _quality(stats: dict[str, Any]) -> str:
    parts = []
    if "rouge1" in stats:
        parts.append(f"R1 {stats['rouge1']:.3f} R2 {stats['rouge2']:.3f} RL {stats['rougeL']:.3f}")
    if "pass@1" in stats:
        parts.append(f"pass@1 {stats['pass@1']:.3f}")
    if "accuracy" in stats:
        parts.append(f"acc {stats['accuracy']:.3f}")
    # Spec-Bench's reference metrics: BLEU and chrF on sacrebleu's 0-100 scale, exact match and token F1 0..1.
    # Sentence BLEU's mean and corpus BLEU, each named (corpus BLEU needs the rows' BLEU counts, schema 14).
    if "sentence_bleu" in stats:
        corpus = f"{stats['corpus_bleu']:.1f}" if "corpus_bleu" in stats else "n/a"
        parts.append(
            f"sentence BLEU (mean) {stats['sentence_bleu']:.1f} corpus BLEU {corpus} "
            f"chrF {stats.get('chrf', float('nan')):.1f}"
        )
    if "exact_match" in stats:
        parts.append(f"EM {stats['exact_match']:.3f} F1 {stats.get('token_f1', float('nan')):.3f}")
    return ", ".join(parts) or "-"


# Header, justification; "speedup" is the ratio of summed wall times (greedy) or of time per token
# (sampling; the header says "speedup/tok"), "per-sample" the mean of per-sample ratios, "n" the
# paired samples and (sample, turn, repeat) units every number of the row is computed on; "state" what
# the arm's carried state was (only in a cell where an arm carries one; see summary_table).
_COLUMNS: tuple[tuple[str, JustifyMethod], ...] = (
    ("arm", "left"),
    ("rows", "right"),
    ("n", "right"),
    ("tok/s", "right"),
    ("compr.", "right"),
    ("speedup", "right"),
    ("95% CI", "right"),
    ("per-sample", "right"),
    ("=AR", "right"),
    ("state", "left"),
    ("quality", "left"),
)


def speedup_header(summary: dict[str, Any]) -> str:
    """``speedup`` (ratio of wall times) or ``speedup/tok`` (ratio of time per token, under sampling)."""
    bases = {stats.get("speedup_basis") for stats in summary["arms"].values()}
    return "speedup/tok" if "time per token" in bases else "speedup"


def interval_text(stats: dict[str, Any]) -> str:
    """``"0.91-1.12"``, or why there is no interval (``"none: 3 samples (< 10)"``)."""
    low, high = stats.get("speedup_ci_low"), stats.get("speedup_ci_high")
    if low is not None and high is not None:
        return f"{low:.2f}-{high:.2f}"
    note = stats.get("speedup_ci_note") or ""
    return "none: " + note.removeprefix("no interval: ") if note else "-"


def table_legend(summary: dict[str, Any]) -> str:
    """What the table's n, speedup and missing intervals mean, in one or two lines."""
    lines = ["n = samples/pairs that every arm completed; every number of a row is computed on them."]
    if speedup_header(summary) == "speedup/tok":
        lines.append("speedup/tok = ratio of time per generated token (sampling: the arms' outputs differ in length).")
    if any((stats.get("speedup_ci_note") or "").startswith("no interval") for stats in summary["arms"].values()):
        lines.append("No 95% CI from too few samples: the bootstrap resamples samples (questions).")
    if STANDARD_PATH_REFERENCE in summary["arms"]:
        lines.append(
            f"speedups are against {summary.get('speedup_baseline')}: the faster of the cell's two AR arms "
            f"(ar on the cell's step path, {STANDARD_PATH_REFERENCE} on the standard one)."
        )
    lines.extend(mismatch_lines(summary))
    return "\n".join(lines)


def mismatch_lines(summary: dict[str, Any]) -> list[str]:
    """One line per arm with greedy mismatches: how many, the logit margins there, engine errors."""
    lines = []
    for arm, stats in summary["arms"].items():
        n = stats.get("mismatches")
        if not n:
            continue
        margins = []
        if stats.get("ar_margin_median") is not None:
            margins.append(f"AR top-1/top-2 margin median {stats['ar_margin_median']:.3g}")
        if stats.get("arm_margin_max") is not None:
            margins.append(f"{arm}'s token at most {stats['arm_margin_max']:.3g} logits below AR's")
        line = f"{arm}: {n} mismatch(es) with AR" + (f" ({'; '.join(margins)})" if margins else "")
        errors = stats.get("engine_errors") or 0
        line += (
            f", {errors} ENGINE ERROR(S) (beyond mismatch.margin_tolerance)"
            if errors
            else ", none beyond mismatch.margin_tolerance"
        )
        lines.append(line)
    return lines


def summary_table(summary: dict[str, Any], state_mode: str | None = None, state_scope: str | None = None) -> Table:
    """One row per arm: n, throughput, compression, speedup with its 95% CI (or why none), match rate,
    carried state and quality.

    Args:
        summary: the cell's summary (``runner.summary``).
        state_mode: the cell's ``method_state.mode`` (warm or cold). The state column is shown when an
            arm carries a state across requests: warm or cold and the fewest-most earlier requests its
            state had seen, ``static`` for a state no request changes (REST's datastore), ``-`` for an
            arm without one.
        state_scope: the cell's ``method_state.scope`` (cell or benchmark), shown after the mode.
    """
    # The mode in the title: a speedup over eager AR and one over compiled AR are different claims.
    mode = f" ({summary['mode']})" if summary.get("mode") else ""
    title = f"{summary.get('cell_name', '')} [{summary.get('cell_id', '')}]{mode}"
    table = Table(title=title, title_justify="left")
    states = {
        arm: method_state_text(
            arm, state_mode, stats.get("state_requests_min"), stats.get("state_requests_max"), state_scope
        )
        for arm, stats in summary["arms"].items()
    }
    shown = any(states.values())
    for header, justify in _COLUMNS:
        if header == "state" and not shown:
            continue
        header = speedup_header(summary) if header == "speedup" else header
        table.add_column(header, justify=justify, no_wrap=header != "quality")
    for arm, stats in summary["arms"].items():
        if arm == summary.get("speedup_baseline", "ar"):  # AR, or the faster AR arm (stats.speedup_baseline)
            speed, interval, per_sample = "1 (base)", "-", "-"
        else:
            speed = _fmt(stats.get("speedup"))
            interval = interval_text(stats)
            per_sample = _fmt(stats.get("speedup_per_sample_mean"))
        errors = f"+{stats['errors']}err" if stats.get("errors") else ""
        table.add_row(
            arm,
            f"{stats['rows']}{errors}",
            f"{stats.get('samples', '-')}/{stats.get('pairs', '-')}",
            _fmt(stats.get("tokens_per_s"), ".1f"),
            _fmt(stats.get("compression_ratio")),
            speed,
            interval,
            per_sample,
            _fmt(stats.get("matches_ar"), ".0%") if "matches_ar" in stats else "-",
            *([states[arm] or "-"] if shown else []),
            _quality(stats),
        )
    return table


def console_summary_sink(
    cell_config: dict[str, Any], summary: dict[str, Any], rows: pd.DataFrame, cell_dir: Path
) -> None:
    """Print the cell's summary table, what was skipped, and where the results are."""
    # Captured output (logs, CI) has no terminal width; 140 columns keep the table on one line per arm,
    # its state column included.
    console = Console(width=None if sys.stdout.isatty() else 140)
    if summary.get("status") == "failed":
        console.print(f"cell {summary['cell_id']} failed: {summary['error']}", markup=False, highlight=False)
        console.print(f"partial results: {cell_dir}", soft_wrap=True, markup=False, highlight=False)
        return
    section = cell_config.get(STATE_SECTION) or {}
    # A config recorded before method_state.scope existed ran per cell.
    console.print(summary_table(summary, section.get("mode"), section.get("scope", SCOPE_BEFORE)))
    console.print(table_legend(summary), markup=False, highlight=False)
    skipped = summary.get("skipped_samples", 0)
    if skipped:
        console.print(f"skipped {skipped} sample(s) with prompts over {summary['max_prompt_tokens']} tokens")
    if summary.get("n_errors"):
        console.print(f"[red]{summary['n_errors']} row(s) failed; see the 'error' column")
    console.print(f"results: {cell_dir}", soft_wrap=True, markup=False, highlight=False)
