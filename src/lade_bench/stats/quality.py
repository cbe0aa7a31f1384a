"""Quality on paired units: per-arm means, paired deltas with cluster intervals, greedy mismatches.

Quality (ROUGE, pass@1, accuracy, ``matches_ar``) = mean over (sample, turn) of the per-key mean over
repeats, so a sample with more repeats does not weigh more. pass@k is reported for k = 1 only:
repeats of a sample reuse its seed and so are not independent completions, which the unbiased
pass@k estimator for k > 1 would require. Intervals resample samples, their turns kept together.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np
import pandas as pd

from lade_bench.metrics.passk import pass_at_k_from_results
from lade_bench.metrics.registry import get_metric
from lade_bench.metrics.speed import bootstrap_sums_ci
from lade_bench.stats.modes import require_one_mode
from lade_bench.stats.rules import Estimate, IntervalSettings, interval_note
from lade_bench.stats.units import BASELINE_ARM, SAMPLE_KEY, UNIT_COLUMN, ok_rows

ROUGE_COLUMNS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL", "rougeLsum")
# Spec-Bench's reference metrics (translation, QA): in ``quality_means`` and summary.json, not among the
# summary table's columns (the committed tables' columns stay as they were recorded). BLEU twice, each
# named for what it is: the mean of the rows' sentence BLEU, and corpus BLEU (:func:`corpus_bleu_of`).
REFERENCE_METRICS: tuple[str, ...] = ("sentence_bleu", "corpus_bleu", "chrf", "exact_match", "token_f1")
CORPUS_BLEU = "corpus_bleu"
# Per-key means of these columns are averaged with the registry's aggregation (metric name -> column).
MEAN_METRICS: dict[str, str] = {
    **{name: name for name in ROUGE_COLUMNS},
    "accuracy": "accuracy",
    "sentence_bleu": "bleu",
    **{name: name for name in REFERENCE_METRICS if name not in ("sentence_bleu", CORPUS_BLEU)},
    "matches_ar": "matches_ar",
}
# Greedy mismatches of an arm (see mismatch_summary): how many, how many are engine errors, and the
# margins at the first divergent position.
MISMATCH_SUMMARY: tuple[str, ...] = ("mismatches", "engine_errors", "ar_margin_median", "arm_margin_max")


def per_key_quality(arm_rows: pd.DataFrame, column: str) -> pd.Series:
    """Per-(sample, turn) mean of a quality column over repeats, as ``quality_means`` averages it.

    Returns:
        Series indexed by (sample_id, turn), sorted; keys without a value are absent.
    """
    good = ok_rows(arm_rows, [*SAMPLE_KEY, column]).dropna(subset=[column])
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
    paired: pd.DataFrame,
    arm: str,
    column: str,
    *,
    baseline: str = BASELINE_ARM,
    intervals: IntervalSettings = IntervalSettings(),
) -> Estimate:
    """``arm`` minus ``baseline`` on a quality column, paired per (sample, turn), interval over samples.

    Args:
        paired: the cell's ``common_rows``, so both arms are scored on the same prompts and seeds.
        arm: the arm compared with the baseline.
        column: a quality column (``rougeL``, ``accuracy``, ...).
        baseline: the arm subtracted.
        intervals: bootstrap settings and the fewest samples an interval needs.

    Raises:
        ValueError: the arm's and the baseline's rows are not all of one mode (compiled or eager).
    """
    require_one_mode(paired[paired["arm"].isin([arm, baseline])], f"{column} of {arm} minus {baseline}")
    ours = per_key_quality(paired[paired["arm"] == arm], column)
    base = per_key_quality(paired[paired["arm"] == baseline], column)
    return mean_estimate((ours - base).dropna(), intervals=intervals)


def quality_means(arm_rows: pd.DataFrame) -> dict[str, float]:
    """ROUGE, accuracy, the reference metrics, ``matches_ar`` and pass@1 of one arm's error-free rows
    (NaN where absent); ``corpus_bleu`` from the rows' BLEU counts (:func:`corpus_bleu_of`).

    Callers pass the arm's paired rows (``common_rows``) so that arms are compared on the same
    samples.
    """
    out: dict[str, float] = {}
    columns = list(dict.fromkeys(MEAN_METRICS.values()))
    # One grouping for every column, as per_key_quality groups one: a column's NaNs drop out of its mean,
    # and a key with none of its values drops out of that column (per_key_quality's rows without one).
    good = ok_rows(arm_rows, [*SAMPLE_KEY, *columns])
    per_keys = good[columns].astype(np.float64).groupby([good[k] for k in SAMPLE_KEY], sort=True).mean()
    for metric, column in MEAN_METRICS.items():
        per_key = per_keys[column].to_numpy()  # float64: NaN is the missing value
        per_key = per_key[~np.isnan(per_key)]
        out[metric] = get_metric(metric).aggregate(per_key) if per_key.size else math.nan
    # Most datasets run no code: no row has a verdict, and the grouping below is skipped.
    verdicts = arm_rows["passed"].notna().to_numpy() & arm_rows["error"].isna().to_numpy()
    passed = ok_rows(arm_rows, [*SAMPLE_KEY, "passed"]).dropna(subset=["passed"]) if verdicts.any() else None
    if passed is None or passed.empty:
        out["pass@1"] = math.nan
    else:
        by_problem = {key: [bool(v) for v in group["passed"]] for key, group in passed.groupby(list(SAMPLE_KEY))}
        out["pass@1"] = pass_at_k_from_results(by_problem, k=1)
    out[CORPUS_BLEU] = corpus_bleu_of(arm_rows)
    return out


def corpus_bleu_of(arm_rows: pd.DataFrame) -> float:
    """Corpus BLEU (0-100) of one arm's error-free rows that carry BLEU counts (``bleu_stats``): sacrebleu's
    ``corpus_bleu`` over one output per (sample, turn), its lowest repeat (a corpus holds each sentence
    once). NaN where no row has counts, and where some rows with a sentence BLEU lack them (rows written
    before schema 14): a corpus of part of the outputs would describe other samples.
    """
    from lade_bench.metrics.text_match import corpus_bleu

    if "bleu_stats" not in arm_rows or arm_rows.empty:
        return math.nan
    good = ok_rows(arm_rows, [*SAMPLE_KEY, "repeat", "bleu", "bleu_stats"])
    scored = good[good["bleu"].notna()]
    if scored.empty or scored["bleu_stats"].isna().any():
        return math.nan
    first = scored.sort_values("repeat", kind="stable").drop_duplicates(list(SAMPLE_KEY))
    return corpus_bleu([list(s) for s in first["bleu_stats"]])


def rescore_cut_answers(rows: pd.DataFrame, datasets: Collection[str]) -> pd.DataFrame:
    """``rows`` with each final-answer ``accuracy`` of an output cut at the cap scored as today's scorer
    scores it (``metrics.task_accuracy.cut_answer_credit``): rows written before the rule (issue 63) kept
    the credit of a last number read from an output the cap cut.

    Args:
        rows: rows with ``accuracy``, ``output_text`` and ``at_cap`` (``with_text_health`` fills it for
            older rows).
        datasets: the datasets whose scorer reads the ending (``DatasetSpec.reads_ending``).

    Returns:
        The same frame where nothing changes, else a copy with those accuracies replaced.
    """
    from lade_bench.metrics.task_accuracy import cut_answer_credit

    if not {"accuracy", "at_cap", "output_text"} <= set(rows.columns) or rows.empty:
        return rows
    cut = rows["at_cap"].fillna(False).astype(bool) & rows["dataset"].isin(list(datasets))
    credited = cut & (rows["accuracy"] == 1.0)
    if not credited.any():
        return rows
    fixed = [cut_answer_credit(1.0, str(text)) for text in rows.loc[credited, "output_text"]]
    out = rows.copy()
    out.loc[credited, "accuracy"] = fixed
    return out


def mismatch_summary(arm_rows: pd.DataFrame) -> dict[str, float]:
    """Greedy mismatches among one arm's error-free rows and the logit margins where they diverge.

    Callers pass the arm's paired rows (``common_rows``), as for :func:`quality_means`. The
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
