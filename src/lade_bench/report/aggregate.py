"""Every number a report shows, computed from the per-sample rows in one place.

Figures, tables, the HTML report, the W&B sink and the notebooks all call this module, so a number
cannot be computed two different ways. The rules (see ``shared/design/conventions.md``):

* A cell is ``(sweep, cell_id)``: the same semantic cell run in two sweeps is two measurements.
* **Paired units.** Every number of a cell (speedup, compression, throughput, ROUGE, pass@1,
  accuracy, ``matches_ar``, and so every difference between arms) is computed on the same units: the
  (sample, turn, repeat) keys at which *every* arm of the cell has an error-free row
  (:func:`common_rows`). A sample that failed on one arm is left out for all arms, so it cannot shift
  a comparison. Each record says its n: ``n_units`` (samples), ``n_pairs`` (paired keys) and
  ``n_errors`` (the arm's own errored rows).
* **Speedup.** Greedy: ``sum(t_ar) / sum(t_arm)``; the arms produce the same tokens, so the same work
  is timed on both sides. Sampling: the ratio of time per generated token,
  ``(sum(t_ar) / sum(tok_ar)) / (sum(t_arm) / sum(tok_arm))``; the arms produce different outputs of
  different lengths (and MT-Bench's turn 2 builds on each arm's own answer), so a ratio of wall times
  would reward the arm that stops earlier. ``speedup_basis`` names which one a record holds.
* **Intervals.** Percentile bootstrap, paired, with the sample (question) as the resampling unit: the
  turns and repeats of a sample are summed first and move together. With fewer than
  :data:`MIN_CI_UNITS` samples no interval is computed (a bootstrap over 3 questions gives a
  meaningless, sometimes zero-width, interval): the point estimate stays and ``speedup_ci_note`` says
  why the interval is missing.
* Compression = ``sum(new_tokens) / sum(decode_steps)`` and throughput = ``sum(new_tokens) /
  sum(wall_time_s)`` over the paired units.
* Quality (ROUGE, pass@1, accuracy, ``matches_ar``) = mean over (sample, turn) of the per-key mean
  over repeats, so a sample with more repeats does not weigh more.
* pass@k is reported for k = 1 only: repeats of a sample reuse its seed and so are not independent
  completions, which the unbiased pass@k estimator for k > 1 would require.
* **Headline cell (main table).** Per (sweep, model, dataset) one greedy cell, chosen without looking
  at the samples it is reported on (:func:`choose_headline`): the configuration the sweep declared
  before it ran (``report.headline`` in its config) when one of its cells has it; else, when the
  configuration alone leaves one candidate (most methods, then prompt-as-reference on), that cell;
  else the candidate with the highest lookahead speedup on half A of the samples (a hash of the
  sample id splits them), reported on the other half B only. The table says which.

Array shapes: every per-sample input is a column of the rows frame (one entry per row).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from lade_bench.decoding.params import LookaheadParams
from lade_bench.methods import REFERENCE, method_rank, sort_methods
from lade_bench.metrics.passk import pass_at_k_from_results
from lade_bench.metrics.registry import get_metric
from lade_bench.metrics.speed import (
    accept_length_histogram,
    bootstrap_ci,
    bootstrap_per_token_ci,
    bootstrap_sums_ci,
    compression_ratio,
    per_token_speedup,
    speedup,
)
from lade_bench.profiling.device_profile import forward_time_at

logger = logging.getLogger(__name__)

# Two columns make a cell unique across sweeps; the rest describe it (identical on all its rows,
# except N/W/G, which some runners leave null on baseline rows).
CELL_KEY: tuple[str, ...] = ("sweep", "cell_id")
CELL_ATTRIBUTES: tuple[str, ...] = (
    "model",
    "dataset",
    "ngram",
    "window",
    "guesses",
    "prompt_as_reference",
    "verification",
    "do_sample",
    "temperature",
    "top_p",
    "top_k",
)
# Rows written before the verification layout was recorded (schema v4) all used the flat layout.
DEFAULT_VERIFICATION = "flat"
# (sample, turn, repeat): what pairs a baseline row with a method row of the same cell.
PAIR_KEY: tuple[str, ...] = ("sample_id", "turn", "repeat")
SAMPLE_KEY: tuple[str, ...] = ("sample_id", "turn")
# The resampling unit of every interval: a sample (an MT-Bench question with both its turns).
UNIT_COLUMN = "sample_id"

BASELINE_ARM = REFERENCE
ROUGE_COLUMNS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL", "rougeLsum")
# Per-key means of these columns are averaged with the registry's aggregation (metric name -> column).
MEAN_METRICS: dict[str, str] = {
    **{name: name for name in ROUGE_COLUMNS},
    "accuracy": "accuracy",
    "matches_ar": "matches_ar",
}

# Defaults shared by the CLI, the notebooks and the W&B sink so their files agree byte for byte.
N_BOOT = 2000
CONFIDENCE = 0.95
BOOT_SEED = 0
# Fewest units (samples) an interval is computed from. Below it a percentile bootstrap only
# reshuffles a handful of values (3 MT-Bench questions gave "0.54 [0.54, 0.54]"), so the report shows
# the point estimate and says why there is no interval.
MIN_CI_UNITS = 10

# What ``speedup`` is a ratio of (``speedup_basis`` column).
BASIS_WALL_TIME = "wall time"
BASIS_PER_TOKEN = "time per token"
# Why a record has no interval, besides too few units.
NOTE_BASELINE = "baseline"
NOTE_NO_PAIRS = "no paired AR rows"

# How the headline cell of a (sweep, model, dataset) was chosen (``selection`` column).
SELECTION_DECLARED = "declared"
SELECTION_ONLY = "only candidate"
SELECTION_SPLIT = "selected on half A"
# The keys of a declared headline (``report.headline`` in a sweep's config).
HEADLINE_KEYS: tuple[str, ...] = ("ngram", "window", "guesses", "prompt_as_reference")

# Greedy mismatches of an arm (see mismatch_summary): how many, how many are engine errors, and the
# margins at the first divergent position.
MISMATCH_SUMMARY: tuple[str, ...] = ("mismatches", "engine_errors", "ar_margin_median", "arm_margin_max")

SUMMARY_COLUMNS: tuple[str, ...] = (
    *CELL_KEY,
    *CELL_ATTRIBUTES,
    "arm",
    "n_rows",
    "n_errors",
    "n_units",
    "n_pairs",
    "speedup_basis",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "speedup_ci_note",
    "compression_ratio",
    "tokens_per_s",
    "new_tokens",
    "decode_steps",
    "wall_time_s",
    "tokens_per_step",
    "step_tokens_mean",
    *ROUGE_COLUMNS,
    "pass@1",
    "accuracy",
    "matches_ar",
    *MISMATCH_SUMMARY,
)
HEADLINE_COLUMNS: tuple[str, ...] = (*SUMMARY_COLUMNS, "selection", "n_candidates")


@dataclass(frozen=True)
class IntervalSettings:
    """How intervals are computed.

    Attributes:
        n_boot: bootstrap replicates.
        confidence: two-sided coverage.
        seed: bootstrap seed (same rows and seed give the same interval).
        min_units: fewest units (samples) an interval is computed from.
    """

    n_boot: int = N_BOOT
    confidence: float = CONFIDENCE
    seed: int = BOOT_SEED
    min_units: int = MIN_CI_UNITS


class Estimate(NamedTuple):
    """A point estimate, its interval (NaN when there is none), its n and why an interval is missing.

    Attributes:
        value: the point estimate (NaN when it cannot be computed).
        low, high: interval bounds; NaN when ``note`` is set.
        n_units: independent units (samples) behind the value.
        n_pairs: paired keys behind the value.
        note: empty when there is an interval, else the reason there is none.
    """

    value: float
    low: float
    high: float
    n_units: int
    n_pairs: int
    note: str


def statistics_rules(min_units: int = MIN_CI_UNITS) -> tuple[str, ...]:
    """The rules of the module docstring in a reader's words (the HTML report lists them)."""
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
    )


def ok_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows without an ``error`` (errored rows carry no timing and never enter an aggregate)."""
    return rows[rows["error"].isna()]


def common_keys(cell_rows: pd.DataFrame) -> pd.DataFrame:
    """The (sample, turn, repeat) keys at which every arm of one cell has an error-free row.

    Returns:
        Frame with the ``PAIR_KEY`` columns, one row per key, sorted.
    """
    n_arms = cell_rows["arm"].nunique()
    good = ok_rows(cell_rows)
    if good.empty:
        return good[list(PAIR_KEY)].iloc[0:0]
    arms_per_key = good.groupby(list(PAIR_KEY), sort=True)["arm"].nunique()
    return arms_per_key[arms_per_key == n_arms].index.to_frame(index=False)


def common_rows(cell_rows: pd.DataFrame) -> pd.DataFrame:
    """Error-free rows of one cell at its :func:`common_keys`: the paired units every number uses."""
    keys = common_keys(cell_rows)
    good = ok_rows(cell_rows)
    return good.merge(keys, on=list(PAIR_KEY), how="inner")


def cell_attributes(cell_rows: pd.DataFrame) -> dict[str, Any]:
    """Identity of one cell: the cell key and the first non-null value of each descriptive column.

    Raises:
        ValueError: ``cell_rows`` is empty or mixes cells.
    """
    if cell_rows.empty:
        raise ValueError("a cell needs at least one row")
    keys = cell_rows[list(CELL_KEY)].drop_duplicates()
    if len(keys) != 1:
        raise ValueError(f"rows of {len(keys)} cells passed as one cell: {keys.to_dict('records')}")
    attributes: dict[str, Any] = {name: _plain(cell_rows[name].iloc[0]) for name in CELL_KEY}
    for name in CELL_ATTRIBUTES:
        present = cell_rows[name].dropna() if name in cell_rows else cell_rows[[]]
        attributes[name] = _plain(present.iloc[0]) if len(present) else None
    if attributes["verification"] is None:
        attributes["verification"] = DEFAULT_VERIFICATION
    return attributes


def speedup_basis(do_sample: Any) -> str:
    """What a cell's speedup is a ratio of: wall time (greedy) or time per token (sampling)."""
    return BASIS_PER_TOKEN if bool(do_sample) else BASIS_WALL_TIME


def per_sample_totals(paired: pd.DataFrame, arm: str) -> pd.DataFrame:
    """Times and tokens of ``arm`` and AR on paired rows, summed per sample over turns and repeats.

    Args:
        paired: a cell's :func:`common_rows`.
        arm: the arm compared with AR.

    Returns:
        Frame with columns ``sample_id, t_ar, t_arm, tok_ar, tok_arm, n_pairs`` (paired keys of the
        sample), one row per sample, sorted by sample id; empty when nothing pairs.
    """
    columns = [*PAIR_KEY, "wall_time_s", "new_tokens"]
    base = paired[paired["arm"] == BASELINE_ARM][columns]
    other = paired[paired["arm"] == arm][columns]
    merged = base.merge(other, on=list(PAIR_KEY), suffixes=("_ar", "_arm"), validate="one_to_one")
    if merged.empty:
        return pd.DataFrame({c: [] for c in ("sample_id", "t_ar", "t_arm", "tok_ar", "tok_arm", "n_pairs")})
    out = merged.groupby("sample_id", sort=True).agg(
        t_ar=("wall_time_s_ar", "sum"),
        t_arm=("wall_time_s_arm", "sum"),
        tok_ar=("new_tokens_ar", "sum"),
        tok_arm=("new_tokens_arm", "sum"),
        n_pairs=("repeat", "size"),
    )
    return out.reset_index()


def paired_times(cell_rows: pd.DataFrame, arm: str) -> pd.DataFrame:
    """:func:`per_sample_totals` of one cell's rows (its common units are found first)."""
    return per_sample_totals(common_rows(cell_rows), arm)


def interval_note(n_units: int, min_units: int = MIN_CI_UNITS) -> str:
    """Why there is no interval over ``n_units`` samples; empty when there are enough."""
    if n_units >= min_units:
        return ""
    return f"no interval: {n_units} sample{'' if n_units == 1 else 's'} (< {min_units})"


def speedup_estimate(
    paired: pd.DataFrame, arm: str, *, sampled: bool, intervals: IntervalSettings = IntervalSettings()
) -> Estimate:
    """Speedup of ``arm`` over AR on a cell's paired rows, with its interval over samples.

    Args:
        paired: the cell's :func:`common_rows`.
        arm: the arm; AR itself gets 1.0 by the same computation and no interval (``"baseline"``).
        sampled: the cell samples (speedup per token) or is greedy (speedup of wall times).
        intervals: bootstrap settings and the fewest samples an interval needs.

    Returns:
        The estimate; value NaN and note ``"no paired AR rows"`` when nothing pairs.
    """
    totals = per_sample_totals(paired, arm)
    if totals.empty:
        return Estimate(math.nan, math.nan, math.nan, 0, 0, NOTE_NO_PAIRS)
    t_ar, t_arm, tok_ar, tok_arm = (totals[c].to_numpy(np.float64) for c in ("t_ar", "t_arm", "tok_ar", "tok_arm"))
    value = per_token_speedup(t_ar, tok_ar, t_arm, tok_arm) if sampled else speedup(t_ar, t_arm)
    n_units, n_pairs = len(totals), int(totals["n_pairs"].sum())
    note = NOTE_BASELINE if arm == BASELINE_ARM else interval_note(n_units, intervals.min_units)
    if note:
        return Estimate(value, math.nan, math.nan, n_units, n_pairs, note)
    boot = {"n_boot": intervals.n_boot, "confidence": intervals.confidence, "seed": intervals.seed}
    if sampled:
        low, high = bootstrap_per_token_ci(t_ar, tok_ar, t_arm, tok_arm, **boot)
    else:
        low, high = bootstrap_ci(t_ar, t_arm, **boot)
    return Estimate(value, low, high, n_units, n_pairs, "")


def per_key_quality(arm_rows: pd.DataFrame, column: str) -> pd.Series:
    """Per-(sample, turn) mean of a quality column over repeats, as ``quality_means`` averages it.

    Returns:
        Series indexed by (sample_id, turn), sorted; keys without a value are absent.
    """
    good = ok_rows(arm_rows)[[*SAMPLE_KEY, column]].dropna(subset=[column])
    if good.empty:
        return pd.Series([], dtype=np.float64, index=pd.MultiIndex.from_tuples([], names=list(SAMPLE_KEY)))
    good = good.assign(**{column: good[column].astype(np.float64)})
    return good.groupby(list(SAMPLE_KEY), sort=True)[column].mean()


def mean_estimate(per_key: pd.Series, *, intervals: IntervalSettings = IntervalSettings()) -> Estimate:
    """Mean of per-(sample, turn) values with a cluster bootstrap interval over samples.

    The turns of one sample are resampled together (a sample's two MT-Bench turns are not
    independent), so the interval's unit is the sample.

    Args:
        per_key: values indexed by (sample_id, turn), e.g. :func:`per_key_quality` or a paired
            difference of two of them.
        intervals: bootstrap settings and the fewest samples an interval needs.

    Returns:
        The estimate; ``n_pairs`` counts (sample, turn) keys. NaN for empty input.
    """
    values = per_key.dropna()
    if values.empty:
        return Estimate(math.nan, math.nan, math.nan, 0, 0, interval_note(0, intervals.min_units))
    by_sample = values.groupby(level=UNIT_COLUMN, sort=True).agg(["sum", "count"])
    n_units, n_keys = len(by_sample), len(values)
    value = float(values.mean())
    note = interval_note(n_units, intervals.min_units)
    if note:
        return Estimate(value, math.nan, math.nan, n_units, n_keys, note)
    low, high = bootstrap_sums_ci(
        by_sample[["sum", "count"]].to_numpy(np.float64),
        lambda sums: sums[:, 0] / sums[:, 1],
        n_boot=intervals.n_boot,
        confidence=intervals.confidence,
        seed=intervals.seed,
    )
    return Estimate(value, low, high, n_units, n_keys, "")


def quality_delta(
    paired: pd.DataFrame, arm: str, column: str, *, intervals: IntervalSettings = IntervalSettings()
) -> Estimate:
    """``arm`` minus AR on a quality column, paired per (sample, turn), interval over samples.

    Args:
        paired: the cell's :func:`common_rows`, so both arms are scored on the same prompts and seeds.
        arm: the arm compared with AR.
        column: a quality column (``rougeL``, ``accuracy``, ...).
        intervals: bootstrap settings and the fewest samples an interval needs.
    """
    ours = per_key_quality(paired[paired["arm"] == arm], column)
    base = per_key_quality(paired[paired["arm"] == BASELINE_ARM], column)
    return mean_estimate((ours - base).dropna(), intervals=intervals)


def quality_means(arm_rows: pd.DataFrame) -> dict[str, float]:
    """ROUGE, accuracy, ``matches_ar`` and pass@1 of one arm's error-free rows (NaN where absent).

    Callers pass the arm's paired rows (:func:`common_rows`) so that arms are compared on the same
    samples.
    """
    out: dict[str, float] = {}
    for metric, column in MEAN_METRICS.items():
        per_key = per_key_quality(arm_rows, column).to_numpy()
        out[metric] = get_metric(metric).aggregate(per_key) if per_key.size else math.nan
    passed = ok_rows(arm_rows)[[*SAMPLE_KEY, "passed"]].dropna(subset=["passed"])
    if passed.empty:
        out["pass@1"] = math.nan
    else:
        by_problem = {key: [bool(v) for v in group["passed"]] for key, group in passed.groupby(list(SAMPLE_KEY))}
        out["pass@1"] = pass_at_k_from_results(by_problem, k=1)
    return out


def mismatch_summary(arm_rows: pd.DataFrame) -> dict[str, float]:
    """Greedy mismatches among one arm's error-free rows and the logit margins where they diverge.

    Callers pass the arm's paired rows (:func:`common_rows`), as for :func:`quality_means`. The
    mismatch rate is ``1 - matches_ar``; these say whether the mismatches are near-ties.

    Returns:
        ``mismatches``: rows whose ids differ from AR's; ``engine_errors``: those flagged because the
        arm's token sits more than ``mismatch.margin_tolerance`` logits below AR's;
        ``ar_margin_median``: median over mismatches of AR's top-1 minus top-2 logit there (small:
        near-ties); ``arm_margin_max``: the largest gap between AR's token and the arm's (what the
        tolerance judges). All NaN where no row carries ``matches_ar`` (AR, sampling); margins NaN
        where no mismatch has one.
    """
    good = ok_rows(arm_rows)
    flags = good["matches_ar"].dropna() if "matches_ar" in good else pd.Series([], dtype=object)
    if flags.empty:
        return dict.fromkeys(MISMATCH_SUMMARY, math.nan)
    mismatched = good.loc[flags.index[~flags.astype(bool)]]

    def column(name: str) -> pd.Series:
        # Rows written before the mismatch columns existed read them as all-null (or lack them).
        return mismatched[name].dropna() if name in mismatched else pd.Series([], dtype=np.float64)

    ar_margins, arm_margins = column("ar_margin").astype(np.float64), column("arm_margin").astype(np.float64)
    return {
        "mismatches": int(len(mismatched)),
        "engine_errors": int(column("engine_error").astype(bool).sum()),
        "ar_margin_median": float(ar_margins.median()) if len(ar_margins) else math.nan,
        "arm_margin_max": float(arm_margins.max()) if len(arm_margins) else math.nan,
    }


def arm_efficiency(arm_rows: pd.DataFrame) -> dict[str, float]:
    """Compression, throughput and totals of one arm's error-free rows (NaN where there are none).

    Callers pass the arm's paired rows (:func:`common_rows`), as for :func:`quality_means`.
    """
    good = ok_rows(arm_rows)
    if good.empty:
        return {
            "compression_ratio": math.nan,
            "tokens_per_s": math.nan,
            "new_tokens": 0,
            "decode_steps": 0,
            "wall_time_s": 0.0,
            "step_tokens_mean": math.nan,
        }
    tokens = good["new_tokens"].to_numpy(dtype=np.float64)
    steps = good["decode_steps"].to_numpy(dtype=np.float64)
    times = good["wall_time_s"].to_numpy(dtype=np.float64)
    return {
        "compression_ratio": compression_ratio(tokens, steps),
        "tokens_per_s": get_metric("tokens_per_s").aggregate(tokens, times),
        "new_tokens": int(tokens.sum()),
        "decode_steps": int(steps.sum()),
        "wall_time_s": float(times.sum()),
        "step_tokens_mean": mean_decode_step_tokens(good),
    }


def mean_decode_step_tokens(rows: pd.DataFrame) -> float:
    """Measured input tokens per forward pass after the prefill, over ``rows`` (``step_tokens``).

    NaN when a row does not count them (rows before schema v4, or a column absent): a mean over part
    of the rows would describe other samples than the arm's other numbers.
    """
    if "step_tokens" not in rows or rows.empty or rows["step_tokens"].isna().any():
        return math.nan
    decode_tokens = sum(int(np.sum(counts[1:])) for counts in rows["step_tokens"])
    decode_steps = sum(len(counts) - 1 for counts in rows["step_tokens"])
    return decode_tokens / decode_steps if decode_steps else math.nan


def lookahead_step_tokens(attributes: Mapping[str, Any], measured_mean: float) -> float:
    """Input tokens of a lookahead cell's step as the report uses them (``tokens_per_step``).

    Flat: ``(W + G) * (N - 1)``, the paper's step size. Trie: the measured mean per decode step,
    since how many tokens a trie saves depends on the candidates (NaN if not measured).
    """
    if attributes.get("verification", DEFAULT_VERIFICATION) == DEFAULT_VERIFICATION:
        return tokens_per_step(attributes["ngram"], attributes["window"], attributes["guesses"])
    return measured_mean


def tokens_per_step(ngram: Any, window: Any, guesses: Any) -> float:
    """Most input tokens of one lookahead step, ``(W + G) * (N - 1)``; NaN when the shape is unset."""
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (ngram, window, guesses)):
        return math.nan
    return float(LookaheadParams(int(ngram), int(window), int(guesses)).tokens_per_step)


def summarize_cell(
    cell_rows: pd.DataFrame,
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = BOOT_SEED,
    min_ci_units: int = MIN_CI_UNITS,
) -> list[dict[str, Any]]:
    """One summary record per arm of one cell (AR first, then the other arms in registry order).

    Every number is computed on the cell's paired units (:func:`common_rows`); ``n_errors`` counts
    the arm's own errored rows. The AR record has speedup 1.0 by the same computation as every other
    arm, and no interval.
    """
    attributes = cell_attributes(cell_rows)
    sampled = bool(attributes["do_sample"])
    intervals = IntervalSettings(n_boot, confidence, seed, min_ci_units)
    paired = common_rows(cell_rows)
    records = []
    for arm in sorted_arms(cell_rows["arm"].unique()):
        arm_rows = cell_rows[cell_rows["arm"] == arm]
        arm_paired = paired[paired["arm"] == arm]
        estimate = speedup_estimate(paired, arm, sampled=sampled, intervals=intervals)
        efficiency = arm_efficiency(arm_paired)
        record = {
            **attributes,
            "arm": arm,
            "n_rows": int(len(arm_rows)),
            "n_errors": int(arm_rows["error"].notna().sum()),
            "n_units": int(arm_paired[UNIT_COLUMN].nunique()),
            "n_pairs": int(len(arm_paired)),
            "speedup_basis": speedup_basis(sampled),
            "speedup": estimate.value,
            "speedup_ci_low": estimate.low,
            "speedup_ci_high": estimate.high,
            "speedup_ci_note": estimate.note,
            **efficiency,
            "tokens_per_step": (
                lookahead_step_tokens(attributes, efficiency["step_tokens_mean"]) if arm == "lookahead" else math.nan
            ),
            **quality_means(arm_paired),
            **mismatch_summary(arm_paired),
        }
        records.append({name: record[name] for name in SUMMARY_COLUMNS})
    return records


def summarize(
    rows: pd.DataFrame,
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = BOOT_SEED,
    min_ci_units: int = MIN_CI_UNITS,
) -> pd.DataFrame:
    """Summary of every (cell, arm) in ``rows``: the table every report draws from.

    Args:
        rows: per-sample rows as returned by ``lade_bench.results.load_rows`` (one or more sweeps).
        n_boot, confidence, seed: bootstrap settings of the speedup CI.
        min_ci_units: fewest samples a CI is computed from (see :data:`MIN_CI_UNITS`).

    Returns:
        One row per (sweep, cell_id, arm) with ``SUMMARY_COLUMNS``, sorted by sweep, model, dataset,
        sampling, N, W, G, prompt-as-reference and arm order.
    """
    records: list[dict[str, Any]] = []
    for _, cell_rows in rows.groupby(list(CELL_KEY), sort=False):
        records.extend(
            summarize_cell(cell_rows, n_boot=n_boot, confidence=confidence, seed=seed, min_ci_units=min_ci_units)
        )
    frame = pd.DataFrame.from_records(records, columns=list(SUMMARY_COLUMNS))
    if frame.empty:
        return frame
    return sort_summary(frame)


def sort_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """Sort summary records in the reading order of tables (nulls last, arms in registry order)."""
    keyed = summary.assign(_arm_order=summary["arm"].map(method_rank))
    by = [
        "sweep",
        "model",
        "dataset",
        "do_sample",
        "temperature",
        "top_p",
        "top_k",
        "ngram",
        "window",
        "guesses",
        "prompt_as_reference",
        "verification",
        "cell_id",
        "_arm_order",
    ]
    ascending = [True] * len(by)
    ascending[by.index("prompt_as_reference")] = False  # the default (True) first
    keyed = keyed.sort_values(by, ascending=ascending, na_position="last", kind="mergesort")
    return keyed.drop(columns="_arm_order").reset_index(drop=True)


def sorted_arms(arms: Sequence[str] | np.ndarray) -> list[str]:
    """Arms in registry order (``lade_bench.methods``; unknown arms last, alphabetically)."""
    return sort_methods(str(a) for a in arms)


def accept_histogram(rows: pd.DataFrame) -> dict[int, int]:
    """Forward passes per number of tokens they emitted, pooled over ``rows`` without error.

    Every forward pass counts, the prefill included, so the histogram's mean is the compression ratio.
    """
    good = ok_rows(rows)
    return accept_length_histogram(list(good["accept_lengths"]))


def declared_cells(
    summary: pd.DataFrame, headlines: Mapping[tuple[str, str], Mapping[str, Any] | None]
) -> frozenset[tuple[str, str]]:
    """Cells whose lookahead shape is the headline their own sweep config declared.

    Args:
        summary: output of :func:`summarize`.
        headlines: ``report.headline`` per (sweep, cell_id), as recorded in each cell's config
            (None or absent: the sweep declared none).

    Returns:
        The (sweep, cell_id) keys whose N, W, G, prompt-as-reference and verification layout (flat
        when the headline names none) equal their declared headline.
    """
    out = set()
    for rec in summary.drop_duplicates(list(CELL_KEY)).to_dict("records"):
        key = (str(rec["sweep"]), str(rec["cell_id"]))
        headline = headlines.get(key)
        if (
            headline
            and all(_same_setting(rec[name], headline.get(name)) for name in HEADLINE_KEYS)
            and rec["verification"] == (headline.get("verification") or DEFAULT_VERIFICATION)
        ):
            out.add(key)
    return frozenset(out)


def sample_halves(sample_ids: Iterable[Any]) -> tuple[frozenset[str], frozenset[str]]:
    """Split sample ids into a selection half A and a report half B, without any measurement.

    Ids are ordered by a SHA-256 of the id (stable across runs, cells and row order, and unrelated to
    file order, in which MT-Bench groups its categories) and dealt alternately, so the halves differ
    by at most one sample; A gets the extra one.

    Returns:
        ``(half_a, half_b)``.
    """
    ordered = sorted({str(s) for s in sample_ids}, key=lambda s: (hashlib.sha256(s.encode()).hexdigest(), s))
    return frozenset(ordered[0::2]), frozenset(ordered[1::2])


def choose_headline(
    rows: pd.DataFrame, summary: pd.DataFrame, declared: Collection[tuple[str, str]] = frozenset()
) -> pd.DataFrame:
    """The headline cell per (sweep, model, dataset), chosen without the samples it is reported on.

    Among the greedy cells of a (sweep, model, dataset):

    1. the cells whose configuration the sweep declared (:func:`declared_cells`), if any;
    2. else those that ran the most methods, preferring prompt-as-reference on (configuration only);
       if one cell is left, it is the headline;
    3. else the samples are split (:func:`sample_halves`): the cell with the highest lookahead
       speedup on half A is chosen, and only half B is reported. Choosing on the reported samples
       would pick the luckiest configuration and overstate its speedup (winner's curse).

    Returns:
        One row per (sweep, model, dataset) with ``sweep, cell_id, model, dataset, selection``
        (``SELECTION_*``), ``n_candidates`` (greedy cells it was chosen among) and
        ``reported_samples`` (the sample ids reported, or None for all).
    """
    columns = ["sweep", "cell_id", "model", "dataset", "selection", "n_candidates", "reported_samples"]
    greedy = summary[~summary["do_sample"].astype(bool)]
    cells = _candidate_frame(greedy, declared)
    choices = []
    for (sweep, model, dataset), group in cells.groupby(["sweep", "model", "dataset"], sort=False):
        choice = _choose_in_group(rows, group)
        if choice is None:
            logger.info("no headline for %s/%s/%s: one sample cannot be split", sweep, model, dataset)
            continue
        cell_id, selection, reported = choice
        choices.append([sweep, cell_id, model, dataset, selection, len(group), reported])
    return pd.DataFrame(choices, columns=columns)


def _candidate_frame(greedy: pd.DataFrame, declared: Collection[tuple[str, str]]) -> pd.DataFrame:
    """One row per greedy cell, in summary order, with what the configuration-only ranking needs."""
    per_cell = []
    for (sweep, cell_id), cell in greedy.groupby(list(CELL_KEY), sort=False):
        per_cell.append(
            {
                "sweep": sweep,
                "cell_id": cell_id,
                "model": cell["model"].iloc[0],
                "dataset": cell["dataset"].iloc[0],
                "n_arms": cell["arm"].nunique(),
                "prompt_as_reference": bool(cell["prompt_as_reference"].iloc[0]),
                "declared": (str(sweep), str(cell_id)) in declared,
            }
        )
    columns = ["sweep", "cell_id", "model", "dataset", "n_arms", "prompt_as_reference", "declared"]
    return pd.DataFrame(per_cell, columns=columns)


def _choose_in_group(rows: pd.DataFrame, group: pd.DataFrame) -> tuple[str, str, frozenset[str] | None] | None:
    """``(cell_id, selection, reported samples)`` for one (sweep, model, dataset); None if impossible."""
    ranked = group.sort_values(["declared", "n_arms", "prompt_as_reference"], ascending=False, kind="mergesort")
    if ranked["declared"].iloc[0]:
        return str(ranked["cell_id"].iloc[0]), SELECTION_DECLARED, None
    top = ranked[(ranked["n_arms"] == ranked["n_arms"].iloc[0])]
    top = top[top["prompt_as_reference"] == top["prompt_as_reference"].iloc[0]]
    if len(top) == 1:
        return str(top["cell_id"].iloc[0]), SELECTION_ONLY, None
    sweep = top["sweep"].iloc[0]
    candidate_rows = rows[(rows["sweep"] == sweep) & rows["cell_id"].isin(top["cell_id"])]
    half_a, half_b = sample_halves(candidate_rows["sample_id"].unique())
    if not half_b:
        return None
    selection_rows = candidate_rows[candidate_rows["sample_id"].astype(str).isin(half_a)]
    scores = [_lookahead_speedup(selection_rows[selection_rows["cell_id"] == c]) for c in top["cell_id"]]
    best = int(np.argmax(scores))  # the first of equal scores, in summary order
    return str(top["cell_id"].iloc[best]), SELECTION_SPLIT, half_b


def _lookahead_speedup(cell_rows: pd.DataFrame) -> float:
    """Greedy lookahead speedup point estimate of a cell's rows; -inf when it cannot be computed."""
    totals = per_sample_totals(common_rows(cell_rows), "lookahead") if len(cell_rows) else pd.DataFrame()
    if totals.empty:
        return -math.inf
    return speedup(totals["t_ar"].to_numpy(np.float64), totals["t_arm"].to_numpy(np.float64))


def headline_rows(rows: pd.DataFrame, choice: pd.DataFrame) -> pd.DataFrame:
    """The rows the headline reports: the chosen cells, restricted to their reported samples."""
    parts = []
    for rec in choice.to_dict("records"):
        cell = rows[(rows["sweep"] == rec["sweep"]) & (rows["cell_id"] == rec["cell_id"])]
        if rec["reported_samples"] is not None:
            cell = cell[cell["sample_id"].astype(str).isin(rec["reported_samples"])]
        parts.append(cell)
    return pd.concat(parts, ignore_index=True) if parts else rows.iloc[0:0]


def headline_summary(
    rows: pd.DataFrame, choice: pd.DataFrame, *, intervals: IntervalSettings = IntervalSettings()
) -> pd.DataFrame:
    """Summary records (all arms) of the headline cells on their reported samples.

    Returns:
        ``HEADLINE_COLUMNS``: the summary columns plus ``selection`` and ``n_candidates``.
    """
    reported = headline_rows(rows, choice)
    if reported.empty:
        return pd.DataFrame(columns=list(HEADLINE_COLUMNS))
    summary = summarize(
        reported,
        n_boot=intervals.n_boot,
        confidence=intervals.confidence,
        seed=intervals.seed,
        min_ci_units=intervals.min_units,
    )
    labels = choice[[*CELL_KEY, "selection", "n_candidates"]]
    return summary.merge(labels, on=list(CELL_KEY), how="left")[list(HEADLINE_COLUMNS)]


def predicted_speedups(summary: pd.DataFrame, profiles: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Speedup predicted from each lookahead cell's compression and its sweep's device profile.

    ``predicted = compression * t(1) / t((W + G) * (N - 1))`` with ``t(k)`` the measured time of one
    forward pass carrying k new tokens (for trie verification, k is the measured mean of the cell's
    decode steps instead, see :func:`lookahead_step_tokens`): a step that emits ``compression`` tokens on average costs
    ``t(k)`` instead of the ``compression * t(1)`` that AR would spend on them. It ignores the host
    overhead of lookahead (pool, window bookkeeping), so the gap to the measured speedup is that cost.
    It is a ratio of time per token, as the measured speedup under sampling is.

    Args:
        summary: output of :func:`summarize`.
        profiles: device profile per sweep name (see ``device_profile``); sweeps without one are left
            out.

    Returns:
        One row per lookahead (sweep, cell) with the cell attributes, ``tokens_per_step``,
        ``compression_ratio``, ``t1_s``, ``tk_s``, ``predicted_speedup`` and the measured ``speedup``.
    """
    columns = [
        *CELL_KEY,
        *CELL_ATTRIBUTES,
        "tokens_per_step",
        "compression_ratio",
        "t1_s",
        "tk_s",
        "predicted_speedup",
        "speedup",
    ]
    lookahead = summary[(summary["arm"] == "lookahead") & summary["sweep"].isin(list(profiles))]
    records = []
    for rec in lookahead.to_dict("records"):
        k = rec["tokens_per_step"]
        if not math.isfinite(k) or not math.isfinite(rec["compression_ratio"]):
            continue
        profile = profiles[rec["sweep"]]
        t1 = forward_time_at(profile, 1)
        tk = forward_time_at(profile, k)  # interpolated: a trie's measured mean need not be whole
        records.append(
            {
                **{c: rec[c] for c in (*CELL_KEY, *CELL_ATTRIBUTES)},
                "tokens_per_step": k,
                "compression_ratio": rec["compression_ratio"],
                "t1_s": t1,
                "tk_s": tk,
                "predicted_speedup": rec["compression_ratio"] * t1 / tk,
                "speedup": rec["speedup"],
            }
        )
    return pd.DataFrame.from_records(records, columns=columns)


def flat_metrics(summary: pd.DataFrame) -> dict[str, float]:
    """Finite numeric metrics of one cell's summary as ``{"<arm>/<metric>": value}`` (for W&B).

    Non-finite values (a metric the dataset does not have, an interval not computed) are left out
    rather than logged as NaN; :func:`flat_notes` says why an interval is missing.
    """
    metric_columns = [c for c in SUMMARY_COLUMNS if c not in (*CELL_KEY, *CELL_ATTRIBUTES, "arm")]
    out: dict[str, float] = {}
    for rec in summary.to_dict("records"):
        for column in metric_columns:
            value = _plain(rec[column])
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out[f"{rec['arm']}/{column}"] = value
    return out


def flat_notes(summary: pd.DataFrame) -> dict[str, str]:
    """Text that qualifies the metrics: ``<arm>/speedup_basis`` and, where set, ``<arm>/speedup_ci_note``."""
    out: dict[str, str] = {}
    for rec in summary.to_dict("records"):
        out[f"{rec['arm']}/speedup_basis"] = str(rec["speedup_basis"])
        if rec["speedup_ci_note"]:
            out[f"{rec['arm']}/speedup_ci_note"] = str(rec["speedup_ci_note"])
    return out


def _same_setting(value: Any, declared: Any) -> bool:
    """A cell attribute equals a declared headline value (ints and bools compared as such)."""
    value = _plain(value)
    if value is None or declared is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(declared, bool) or isinstance(value, bool):
        return bool(value) == bool(declared)
    return int(value) == int(declared)


def _plain(value: Any) -> Any:
    """A pandas/numpy scalar as a plain Python value (``None`` for NA)."""
    if value is None or value is pd.NA:
        return None
    return value.item() if isinstance(value, np.generic) else value
