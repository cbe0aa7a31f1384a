"""The Spec-Bench leaderboard: per category group and overall, each method's paired speedup over AR.

Spec-Bench (Xia et al., ACL 2024 Findings; hemingkx/Spec-Bench ``Leaderboard.md``) reports, per group
(MT-Bench, translation, summarization, QA, math reasoning, RAG) and overall, each method's speedup
over AR and its mean accepted tokens. Here each number is this suite's paired statistic: a method's
rows are paired with the AR rows of its own cell (``stats.pooled_units``: several cells of one method
pooled, each unit still paired within its cell), the speedup is the ratio of summed wall times with
a bootstrap interval over samples and its n (``stats.speedup_estimate``), beside tokens accepted per
decode step, input tokens per decode step (the draft's width: what a step costs), the state's warmth
for a method that learns across requests, the group's quality metric where the file has references,
and how many outputs equal AR's. A (model, method) measured under several lookahead settings (the
``spec_bench`` sweep's two lookahead cells) is one entry per setting.

Answer files published by Spec-Bench users (``--spec-bench-answers BASELINE METHOD ...``) are shown
beside, labelled external, with Spec-Bench's own arithmetic (``evaluation/speed.py``: the mean over
questions of tokens per second, method over baseline, and the mean of ``accept_lengths``) and no
interval; they never enter a paired statistic of this sweep.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from lade_bench import stats
from lade_bench.datasets.spec_bench import GROUP_OF, GROUPS, SCORED_COLUMNS, UNSCORED, parse_sample_id
from lade_bench.export.spec_bench_answers import (
    AnswerFileError,
    AnswerSet,
    answer_records,
    questions,
    read_answer_file,
    split_settings,
)
from lade_bench.export.spec_bench_records import QuestionFileError, read_questions
from lade_bench.export.spec_bench_speed import SpeedPyResult, TurnCounter, speed_py, turn_token_counter
from lade_bench.methods import method_color, method_label, method_state_text
from lade_bench.methods.state import SCOPE_BEFORE, warmth_words
from lade_bench.report.figures import FigureOutput, _n_text, _titled, save_figure
from lade_bench.report.sweep import Sweep
from lade_bench.report.table_format import MISSING
from lade_bench.report.tables import (
    AT_CAP_HEADER,
    LOOPS_HEADER,
    NO_LOOP_HEADER,
    REPEATED_HEADER,
    PaperTable,
    at_cap_cell,
    fmt,
    fmt_speedup,
    loops_cell,
    no_loop_speedup_cell,
    write_table,
)

logger = logging.getLogger(__name__)

DATASET = "spec_bench"
OVERALL = "overall"
# Spec-Bench's own numbers beside ours (``export.spec_bench_speed``): its speedup and its tau.
SPEED_PY_SPEEDUP = "speed.py"
SPEED_PY_TAU = "speed.py tau"
COLUMNS = (*GROUPS, OVERALL)
COLUMN_TITLES = {
    "mt_bench": "MT-Bench",
    "translation": "Translation",
    "summarization": "Summarization",
    "qa": "QA",
    "math_reasoning": "Math",
    "rag": "RAG",
    OVERALL: "Overall",
}
# The group's quality metric as the leaderboard prints it: (column, label, scale, unit); summarization
# shows ROUGE-L only (every ROUGE column is in summary.json).
QUALITY_SHOWN = {
    # BLEU twice, each named: the mean of sentence BLEU, and corpus BLEU (n/a for rows without BLEU counts).
    "translation": (
        ("sentence_bleu", "sentence BLEU (mean)", 1.0, ""),
        ("corpus_bleu", "corpus BLEU", 1.0, ""),
        ("chrf", "chrF (mean)", 1.0, ""),
    ),
    "summarization": (("rougeL", "ROUGE-L", 100.0, ""),),
    "math_reasoning": (("accuracy", "accuracy", 100.0, "%"),),
    "rag": (("exact_match", "EM", 100.0, "%"), ("token_f1", "F1", 100.0, "")),
}
assert set(QUALITY_SHOWN) == set(SCORED_COLUMNS)
SOURCE_SWEEP = "this sweep (paired)"
EXTERNAL = "external"

LEADERBOARD = PaperTable(
    "spec_bench_leaderboard",
    "Spec-Bench leaderboard (greedy): per category group and overall, each method's speedup over the AR of "
    "its own cell (ratio of summed wall times on identical outputs, 95% paired bootstrap CI over samples, "
    "or the reason there is none) and n = samples; Method = the configuration that ran, as the cells "
    "recorded it; speed.py = Spec-Bench's own speedup on the same rows exported as its answer files "
    "(evaluation/speed.py: the mean over questions of tokens/s over the mean over the AR file's questions, "
    "AR's tokens re-counted from its text with the model's tokenizer, len(input_ids) - 1 per turn; "
    "empty where the tokenizer cannot be loaded); Accepted/step = tokens emitted per decode step "
    "(Spec-Bench's tau without the prefill); speed.py tau = Spec-Bench's mean of accept_lengths, the "
    "prefill's token counted as a step; Width/step = input tokens per decode step (the draft a step "
    "verifies: its cost); State = a stateful method's carried state, warm or cold, per cell or per benchmark "
    "(method_state.scope: one state over every group, as Spec-Bench runs it), and the fewest-most "
    "earlier requests it had seen, or static where no request changes it (REST's datastore); Quality = "
    "the group's metric where Spec-Bench's file has references "
    "(translation: the mean of sentence BLEU, corpus BLEU (sacrebleu's corpus_bleu of the outputs; n/a for "
    "rows written before their BLEU counts were kept) and the mean of sentence chrF; summarization ROUGE-L "
    "x100, math final-number accuracy, RAG exact match/token F1 x100), else why not; At cap = outputs that "
    "stopped at max_new_tokens without ending, of the paired ones (a math answer cut there scores only an "
    "explicit final answer); =AR = outputs token-identical to AR; Repeated 4-grams = the mean share of an "
    "output's token 4-grams that repeat an earlier one; Loops = outputs ending in an exact repeating loop (>= 2 "
    "periods, >= 16 tokens); Speedup without loops = the same paired speedup on the samples whose AR output "
    "ends in no loop (chosen by AR's output, so every method is compared on the same samples; n = samples). "
    "External rows: Spec-Bench answer files, "
    "Spec-Bench's speed.py arithmetic (mean tokens/s ratio on their baseline's recorded new_tokens, mean "
    "accept_lengths), no CI, never paired.",
    lambda sweep: leaderboard_table(board_records(sweep)),
)
SPEEDUPS = PaperTable(
    "spec_bench_speedups",
    "Spec-Bench speedups at a glance: the leaderboard's speedup over AR per group and overall "
    "(n = samples in brackets; see spec_bench_leaderboard for the intervals), tau = tokens per decode step "
    "overall; Overall speed.py and speed.py tau = Spec-Bench's evaluation/speed.py on the same rows (mean "
    "tokens/s ratio, AR's tokens re-counted with the model's tokenizer; mean accept_lengths, prefill "
    "included). External rows: Spec-Bench answer files with Spec-Bench's own arithmetic.",
    lambda sweep: speedups_table(board_records(sweep)),
)
# The leaderboard's tables by name, as PAPER_TABLES holds the others (the W&B report rebuilds them by name).
BOARD_TABLES: dict[str, PaperTable] = {LEADERBOARD.name: LEADERBOARD, SPEEDUPS.name: SPEEDUPS}
FIGURE = "spec_bench_leaderboard"
FIGURE_CAPTION = (
    "Spec-Bench leaderboard: each method's speedup over the AR of its own cell per category group and "
    "overall, with its 95% paired bootstrap interval where there are enough samples; hollow markers are "
    "external answer files (Spec-Bench's arithmetic, no interval)."
)


@dataclass(frozen=True)
class BoardResult:
    """What :func:`build_board` wrote: the tables (name -> files), the figure, the display tables, and the
    records they show at full precision (:func:`board_records`)."""

    tables: dict[str, list[Path]]
    figure: FigureOutput
    shown: dict[str, tuple[str, pd.DataFrame]]
    records: pd.DataFrame


def group_of_sample(sample_id: str) -> str:
    """The Spec-Bench group (report column) a row's sample belongs to."""
    return GROUP_OF[parse_sample_id(sample_id)[0]]


def _entries(rows: pd.DataFrame) -> pd.DataFrame:
    """The greedy spec_bench rows with their entry (setting) and group columns."""
    rows = rows[(rows["dataset"] == DATASET) & ~rows["do_sample"].astype(bool)]
    if rows.empty:
        return rows.assign(setting=pd.Series(dtype=object), group=pd.Series(dtype=object))
    return rows.assign(setting=split_settings(rows).fillna(""), group=rows["sample_id"].map(group_of_sample))


def _state_modes(sweep: Sweep) -> dict[tuple[str, str], str]:
    """``method_state.mode`` and ``scope`` of each cell as the State column says them (``"warm per cell"``,
    ``"warm per benchmark"``), from its recorded config; a config recorded before the scope ran per cell."""
    modes = {}
    for cell in sweep.cells:
        config = sweep.cell_config((cell.sweep, cell.cell_id))
        section = config.get("method_state") or {}
        mode = section.get("mode")
        if mode is not None:
            modes[(cell.sweep, cell.cell_id)] = warmth_words(str(mode), str(section.get("scope", SCOPE_BEFORE)))
    return modes


def board_records(sweep: Sweep, external: Sequence[AnswerSet] = ()) -> pd.DataFrame:
    """One record per (model, mode, method, setting, column) of the sweep's spec_bench cells, then the
    external answer sets (the first is their baseline), each with every number the leaderboard shows.

    Empty when the sweep has no greedy spec_bench rows and nothing external is given.
    """
    rows = _entries(sweep.rows)
    if len(rows):
        # The configuration each (cell, arm) ran, as its recorded config names it: an entry is one
        # configuration, labelled with it ("SAM-Decoding (Token Recycling tree)").
        keys = rows[["sweep", "cell_id", "arm"]].drop_duplicates()
        label = {k: sweep.arm_label(k[2], [k[:2]]) for k in keys.itertuples(index=False, name=None)}
        rows = rows.assign(
            configuration=[label[k] for k in zip(rows["sweep"], rows["cell_id"], rows["arm"], strict=True)]
        )
    else:
        rows = rows.assign(configuration=pd.Series(dtype=object))
    modes = _state_modes(sweep)
    counters: dict[str, TurnCounter | None] = {}
    answers = _cell_answers(rows)
    records: list[dict[str, Any]] = []
    cell_key = ["sweep", "cell_id"]
    # Each cell's rows once, in the rows' order (what set_index(cell_key).loc[key] gave per entry and key).
    cell_rows = {key: cell.reset_index(drop=True) for key, cell in rows.groupby(cell_key, sort=False)}
    for (model, arm, setting, configuration), entry_rows in rows[rows["arm"] != stats.BASELINE_ARM].groupby(
        ["model", "arm", "setting", "configuration"], sort=True
    ):
        cells = {key: cell_rows[key] for key in entry_rows.groupby(cell_key).groups}
        if str(model) not in counters:
            counters[str(model)] = _turn_counter(sweep, next(iter(cells)))
        spec_bench = _speed_py_columns(answers, [(str(k[0]), str(k[1])) for k in cells], str(arm), counters[str(model)])
        for column in COLUMNS:
            chosen = [c if column == OVERALL else c[c["group"] == column] for c in cells.values()]
            chosen = [c for c in chosen if len(c)]
            if not chosen:
                continue
            record = _paired_record(stats.pooled_units(chosen), arm, column, sweep.intervals)
            warmth = sorted({modes.get(key, "") for key in cells if modes.get(key)})
            records.append(
                {
                    "source": SOURCE_SWEEP,
                    "model": model,
                    "arm": arm,
                    "label": configuration,
                    "setting": setting,
                    "column": column,
                    "state_mode": "/".join(warmth),
                    **record,
                    **_speed_py_fields(spec_bench.get(column)),
                }
            )
    if external:
        records += external_records(external[0], external[1:])
    return pd.DataFrame.from_records(records)


def _paired_record(paired: pd.DataFrame, arm: str, column: str, intervals: stats.IntervalSettings) -> dict[str, Any]:
    # Against AR, or the faster AR arm where the cells also time AR on the standard step path.
    baseline = stats.speedup_baseline(paired, False)
    estimate = stats.speedup_estimate(paired, arm, sampled=False, baseline=baseline, intervals=intervals)
    arm_rows = paired[paired["arm"] == arm]
    efficiency = stats.arm_efficiency(arm_rows)
    quality = stats.quality_means(arm_rows)
    # Text health: repetition and loops of the arm's outputs, and the speedup on the units whose AR output
    # ends in no loop (the same estimator and interval on fewer units).
    health = stats.health_means(arm_rows)
    no_loop = stats.loop_free_speedup(paired, arm, sampled=False, baseline=baseline, intervals=intervals)
    return {
        "speedup": estimate.value,
        "speedup_ci_low": estimate.low,
        "speedup_ci_high": estimate.high,
        "speedup_ci_note": estimate.note,
        "n_units": estimate.n_units,
        "n_pairs": estimate.n_pairs,
        "mean_accepted": efficiency["mean_accepted"],
        "step_tokens_mean": efficiency["step_tokens_mean"],
        "state_requests_min": efficiency["state_requests_min"],
        "state_requests_max": efficiency["state_requests_max"],
        "matches_ar": quality["matches_ar"],
        "quality": _quality_text(column, quality),
        "n_at_cap": efficiency["n_at_cap"],
        "repeated_4gram_share": health["repeated_4gram_share"],
        "n_loops": health["n_loops"],
        "speedup_no_loop": no_loop.value,
        "speedup_no_loop_ci_low": no_loop.low,
        "speedup_no_loop_ci_high": no_loop.high,
        "speedup_no_loop_ci_note": no_loop.note,
        "n_units_no_loop": no_loop.n_units,
    }


def _quality_text(column: str, quality: dict[str, float]) -> str:
    if column == OVERALL:
        return ""
    if column in QUALITY_SHOWN:
        return ", ".join(
            f"{label} {fmt(quality[name], 1, scale)}{unit}" for name, label, scale, unit in QUALITY_SHOWN[column]
        )
    return f"unscored: {UNSCORED[GROUPS[column][0]].reason}"


def external_records(baseline: AnswerSet, methods: Sequence[AnswerSet]) -> list[dict[str, Any]]:
    """Records of Spec-Bench answer files, with Spec-Bench's ``speed.py`` arithmetic and no interval.

    Per column, ``spec_bench_speed.speed_py``: the mean over the method's questions of
    ``sum(new_tokens) / sum(wall_time)`` of its first choice, over the same mean of the baseline's
    questions (the baseline's own ``new_tokens``: speed.py re-tokenises the baseline's text with the
    model's tokenizer, which a published file does not name), and the mean of ``accept_lengths``
    (Spec-Bench's tau, prefill step included), both in the speed.py columns; the speedup also in the
    speedup column, which has no paired number for them.
    """
    records = []
    for answers in methods:
        for column in COLUMNS:
            ours, base = questions(answers, _categories(column)), questions(baseline, _categories(column))
            if not ours or not base:
                continue
            theirs = speed_py(ours, base)
            records.append(
                {
                    "source": EXTERNAL,
                    "model": answers.model_id,
                    "arm": EXTERNAL,
                    "label": "",
                    "setting": f"vs {baseline.model_id}",
                    "column": column,
                    "state_mode": "",
                    "speedup": theirs.speedup,
                    "speedup_ci_low": math.nan,
                    "speedup_ci_high": math.nan,
                    "speedup_ci_note": "external: no interval",
                    "n_units": len(ours),
                    "n_pairs": len(ours),
                    "mean_accepted": math.nan,  # tokens per decode step: a published file has no prefill mark
                    "step_tokens_mean": math.nan,
                    "state_requests_min": math.nan,
                    "state_requests_max": math.nan,
                    "matches_ar": math.nan,
                    "quality": "",
                    "n_at_cap": math.nan,  # a published answer file records no budget
                    # An answer file's outputs are text, not this suite's token ids: no text health.
                    "repeated_4gram_share": math.nan,
                    "n_loops": math.nan,
                    "speedup_no_loop": math.nan,
                    "speedup_no_loop_ci_low": math.nan,
                    "speedup_no_loop_ci_high": math.nan,
                    "speedup_no_loop_ci_note": "",
                    "n_units_no_loop": 0,
                    **_speed_py_fields(theirs),
                }
            )
    return records


def _categories(column: str) -> list[str]:
    """Spec-Bench's categories of a report column (every one for overall)."""
    return [c for members in GROUPS.values() for c in members] if column == OVERALL else list(GROUPS[column])


def _speed_py_fields(result: SpeedPyResult | None) -> dict[str, float]:
    """A record's speed.py columns (NaN where speed.py has no number for it)."""
    if result is None:
        return {"speedpy_speedup": math.nan, "speedpy_tau": math.nan}
    return {"speedpy_speedup": result.speedup, "speedpy_tau": result.tau}


def _turn_counter(sweep: Sweep, key: tuple[str, str]) -> TurnCounter | None:
    """speed.py's baseline token count with the tokenizer of the model cell ``key`` recorded (its config's
    ``model`` section and ``model_cache_dir``; the tokenizer only, no weights); None where the cell
    recorded no model or its tokenizer cannot be loaded (then speed.py's speedup is not shown: counted
    otherwise it would not be speed.py's number)."""
    config = sweep.cell_config(key)
    if not isinstance(config.get("model"), dict):
        return None
    from omegaconf import OmegaConf

    from lade_bench.models.loading import load_tokenizer

    try:
        tokenizer = load_tokenizer(OmegaConf.create(config["model"]), cache_dir=config.get("model_cache_dir"))
    except (OSError, ValueError) as why:
        logger.warning("speed.py's speedup not shown for %s: its tokenizer cannot be loaded (%s)", key, why)
        return None
    return turn_token_counter(tokenizer)


def _cell_answers(rows: pd.DataFrame) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """Each (sweep, cell id, arm)'s rows as Spec-Bench answer records (``answer_records``, what the export
    writes), told apart by each record's ``answer_id`` (``<cell id>-<sample>``); a sweep whose files would
    hold a question twice (two cells of one kind asking it) exported cell by cell."""
    found: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for sweep, part in rows.groupby("sweep", sort=False):
        try:
            sets = answer_records(part)
        except AnswerFileError:
            sets = [s for _, cell in part.groupby("cell_id", sort=False) for s in answer_records(cell)]
        cells = set(part["cell_id"])
        for answer_set in sets:
            for record in answer_set.records:
                cell_id = next(c for c in cells if record["answer_id"].startswith(f"{c}-"))
                found.setdefault((str(sweep), str(cell_id), str(answer_set.arm)), []).append(record)
    return found


def _speed_py_columns(
    answers: dict[tuple[str, str, str], list[dict[str, Any]]],
    cells: Sequence[tuple[str, str]],
    arm: str,
    count_turn: TurnCounter | None,
) -> dict[str, SpeedPyResult]:
    """speed.py's numbers of ``arm`` over AR in ``cells`` ((sweep, cell id) keys of ``answers``, the
    rows as :func:`_cell_answers` exports them), per report column, against the AR records of the same
    cells. Without ``count_turn`` (no tokenizer) the speedup is NaN and only tau is given.
    """
    ours = [r for key in cells for r in answers.get((*key, arm), [])]
    base = [r for key in cells for r in answers.get((*key, stats.BASELINE_ARM), [])]
    found = {}
    for column in COLUMNS:
        wanted = set(_categories(column))
        mine, theirs = ([r for r in records if r["category"] in wanted] for records in (ours, base))
        if not mine or not theirs:
            continue
        result = speed_py(mine, theirs, count_turn)
        found[column] = result if count_turn else SpeedPyResult(math.nan, result.tau, result.n_questions)
    return found


def entry_label(rec: dict[str, Any]) -> str:
    """``"Lookahead (n5-w7-g7)"``, ``"SAM-Decoding (Token Recycling tree)"`` (the configuration that ran,
    ``Sweep.arm_label``), or ``"external: <model_id>"``."""
    if rec["source"] == EXTERNAL:
        return f"external: {rec['model']}"
    label = rec.get("label") or method_label(str(rec["arm"]))
    return f"{label} ({rec['setting']})" if rec["setting"] else label


def _state_text(rec: dict[str, Any]) -> str:
    """``"warm per cell 0-19"``, ``"static"`` (REST's datastore) or empty (``methods.method_state_text``)."""
    mode = rec["state_mode"] or None
    return method_state_text(str(rec["arm"]), mode, rec["state_requests_min"], rec["state_requests_max"])


def leaderboard_table(records: pd.DataFrame) -> pd.DataFrame:
    """The long leaderboard: one row per (model, method, column) as display strings."""
    if records.empty:
        return pd.DataFrame()
    rows = []
    for rec in records.to_dict("records"):
        rows.append(
            {
                "Model": rec["model"] if rec["source"] != EXTERNAL else EXTERNAL,
                "Method": entry_label(rec),
                "Group": COLUMN_TITLES[rec["column"]],
                "Speedup (95% CI)": fmt_speedup(
                    rec["speedup"], rec["speedup_ci_low"], rec["speedup_ci_high"], rec["speedup_ci_note"]
                ),
                "n": str(int(rec["n_units"])),
                SPEED_PY_SPEEDUP: fmt(rec["speedpy_speedup"]),
                "Accepted/step": fmt(rec["mean_accepted"]),
                SPEED_PY_TAU: fmt(rec["speedpy_tau"]),
                "Width/step": fmt(rec["step_tokens_mean"], 1),
                "State": _state_text(rec),
                "Quality": rec["quality"],
                # Beside the quality: the outputs the cap cut (a cut answer scores what it had reached).
                AT_CAP_HEADER: at_cap_cell(rec),
                "=AR (%)": fmt(rec["matches_ar"], 1, 100.0) if rec["source"] != EXTERNAL else "",
                REPEATED_HEADER: fmt(rec["repeated_4gram_share"], 1, 100.0),
                LOOPS_HEADER: loops_cell(rec),
                NO_LOOP_HEADER: no_loop_speedup_cell(rec),
            }
        )
    return pd.DataFrame(rows)


def speedups_table(records: pd.DataFrame) -> pd.DataFrame:
    """Spec-Bench's layout: one row per (model, method), one speedup column per group, overall and tau."""
    if records.empty:
        return pd.DataFrame()
    rows = []
    for (_, model, _, _), entry in records.groupby(["source", "model", "arm", "setting"], sort=False):
        by_column = {rec["column"]: rec for rec in entry.to_dict("records")}
        first = next(iter(by_column.values()))
        row = {"Model": model if first["source"] != EXTERNAL else EXTERNAL, "Method": entry_label(first)}
        for column in COLUMNS:
            rec = by_column.get(column)
            row[COLUMN_TITLES[column]] = MISSING if rec is None else f"{fmt(rec['speedup'])}x ({int(rec['n_units'])})"
        overall = by_column.get(OVERALL)
        row["tau"] = fmt(overall["mean_accepted"]) if overall is not None else MISSING
        row[f"Overall {SPEED_PY_SPEEDUP}"] = fmt(overall["speedpy_speedup"]) if overall is not None else MISSING
        row[SPEED_PY_TAU] = fmt(overall["speedpy_tau"]) if overall is not None else MISSING
        rows.append(row)
    return pd.DataFrame(rows)


def draw_board(records: pd.DataFrame, context: str) -> Figure:
    """One row of panels per model (external answer files in a row of their own), one panel per group and
    overall: each method's speedup with its interval, the panel's n in its title, parity marked."""
    models = list(dict.fromkeys(records["model"].where(records["source"] != EXTERNAL, EXTERNAL)))
    counts = [
        len({entry_label(rec) for rec in records.to_dict("records") if _row_of(rec) == model}) for model in models
    ]
    # The groups the records have (a sweep of some categories draws no empty panels).
    columns = [column for column in COLUMNS if column in set(records["column"])]
    n_cols = len(columns)
    height = 1.0 + sum(0.85 + 0.34 * count for count in counts)
    fig = Figure(figsize=(2.1 * n_cols + 1.8, height), layout="constrained")
    # Each model's row as tall as its methods need, so an external row of one file is not stretched.
    axes = fig.subplots(len(models), n_cols, sharex=True, squeeze=False, gridspec_kw={"height_ratios": counts})
    highs = pd.concat([records["speedup"], records["speedup_ci_high"]]).astype(float)
    right = 1.15 * max(1.0, float(np.nanmax(highs.to_numpy())))  # parity always in view
    for row, model in enumerate(models):
        shown = records[(records["source"] == EXTERNAL) if model == EXTERNAL else (records["model"] == model)]
        entry_labels = list(dict.fromkeys(entry_label(rec) for rec in shown.to_dict("records")))
        for col, column in enumerate(columns):
            ax = axes[row][col]
            part = shown[shown["column"] == column]
            for rec in part.to_dict("records"):
                y = entry_labels.index(entry_label(rec))
                external = rec["source"] == EXTERNAL
                colour = "0.35" if external else (method_color(str(rec["arm"])) or "C0")
                low, high = rec["speedup_ci_low"], rec["speedup_ci_high"]
                if not external and np.isfinite(low) and np.isfinite(high):
                    ax.errorbar(
                        rec["speedup"], y, xerr=[[rec["speedup"] - low], [high - rec["speedup"]]],
                        fmt="none", ecolor=colour, capsize=3, lw=1.2,
                    )  # fmt: skip
                ax.plot(rec["speedup"], y, "o", color=colour, mfc="none" if external else colour, ms=6)
            ax.axvline(1.0, color="0.5", lw=0.8, ls="--")
            ax.set_xlim(0.0, right)
            ax.set_ylim(len(entry_labels) - 0.5, -0.5)
            ax.set_yticks(range(len(entry_labels)))
            ax.set_yticklabels(entry_labels if col == 0 else [""] * len(entry_labels), fontsize=8)
            n = _n_text(part["n_units"]) if len(part) else "n=0 (no rows)"
            title = COLUMN_TITLES[column] + (f"\n{model}" if col == 0 else "\n") + f"\n{n}"
            ax.set_title(title, fontsize=8)
            ax.tick_params(axis="x", labelsize=8)
            # Few ticks, none at the right edge: side by side, one panel's last label would meet the next one's first.
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4, prune="upper"))
            ax.grid(axis="x", color="0.9")
            if row == len(models) - 1:
                ax.set_xlabel("speedup over AR (×)", fontsize=8)
    return _titled(fig, "Spec-Bench leaderboard: speedup over AR per category group (greedy)", context)


def _row_of(rec: dict[str, Any]) -> str:
    return EXTERNAL if rec["source"] == EXTERNAL else str(rec["model"])


def read_external_answers(
    external_files: Sequence[str | os.PathLike[str]], question_file: str | os.PathLike[str] | None
) -> list[AnswerSet]:
    """Read the Spec-Bench answer files shown beside the leaderboard: the baseline's first, then methods'.

    Called before the sweep is loaded, so that a bad file is refused before any report work starts.
    Every record is checked against Spec-Bench's question file (``question_file``).

    Raises:
        AnswerFileError: a single external file (a method file needs its baseline's), files without a
            question file, a question file that cannot be read, or an external file that is not a
            Spec-Bench answer file (one line: file, line and field named).
    """
    if not external_files:
        return []
    if len(external_files) == 1:
        raise AnswerFileError("--spec-bench-answers takes the baseline's answer file first, then one or more methods'")
    if question_file is None:
        raise AnswerFileError(
            "--spec-bench-answers needs --spec-bench-questions FILE, Spec-Bench's question.jsonl "
            "(every answer record is checked against its question)"
        )
    try:
        questions = read_questions(question_file)
    except QuestionFileError as why:
        raise AnswerFileError(str(why)) from None
    return [read_answer_file(path, questions) for path in external_files]


def build_board(
    sweep: Sweep,
    tables_dir: str | os.PathLike[str],
    figures_dir: str | os.PathLike[str],
    external: Sequence[AnswerSet] = (),
) -> BoardResult | None:
    """Write the leaderboard tables and figure when the sweep has spec_bench rows (or answer files are
    given, as :func:`read_external_answers` reads them: the first is their baseline, the others methods);
    None otherwise (nothing is listed as skipped: a report of other benchmarks has no leaderboard to miss).
    """
    records = board_records(sweep, list(external))
    if records.empty:
        return None
    provenance = f"Computed from {len(sweep.rows)} rows of sweep {sweep.label}" + (
        f" and {len(external)} Spec-Bench answer files" if external else ""
    )
    tables, shown = {}, {}
    for spec, table in ((LEADERBOARD, leaderboard_table(records)), (SPEEDUPS, speedups_table(records))):
        written = write_table(table, tables_dir, spec, provenance)
        if written is not None:
            tables[spec.name] = written
            shown[spec.name] = (spec.caption, table)
    ours = _entries(sweep.rows)
    context = sweep.context_line(ours) if len(ours) else "Spec-Bench answer files only"
    png, pdf = save_figure(draw_board(records, context), figures_dir, FIGURE)
    return BoardResult(tables, FigureOutput(FIGURE, FIGURE_CAPTION, png, pdf), shown, records)
