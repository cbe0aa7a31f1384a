"""Statistics of the per-sample rows: paired units, estimators, bootstrap intervals, the n rules.

One place computes every number the report, ``summary.json``, the console, W&B and the tuner show, so
a number cannot be computed two different ways. It reads row frames and imports no presentation,
runner or tuner code; the baseline arm is a parameter everywhere (``baseline=``, default
:data:`BASELINE_ARM`). ``docs/statistics.md`` states the conventions and where each is implemented.

Modules, one job each:

* ``units``: pairing rows into units (the keys every arm completed, summed per sample).
* ``modes``: eager or compiled rows, and the refusal to pair the two in one comparison.
* ``rules``: bootstrap settings, the n rules (``MIN_CI_UNITS``, ``interval_note``), ``Estimate``.
* ``speedup``: ratio-of-sums speedup with its interval, per-sample-mean speedup.
* ``quality``: quality means, paired quality deltas with cluster intervals, greedy mismatches.
* ``efficiency``: compression, throughput, tokens per step, accepted-tokens histogram.
* ``baseline_gain``: one arm against itself in two cells (AR compiled or in bf16 against eager fp32 AR).
* ``contrast``: one setting's paired effect: two cells that differ in it only, on the samples both ran.
* ``pooled``: several cells' paired units in one comparison, each unit paired within its own cell.
* ``drift``: the spread of identical AR work across a sweep's cells (the noise floor between cells).
* ``text_health``: repetition and loops of the rows' outputs, the speedup on units whose AR output ends in
  no loop.
* ``summary``: one record per (cell, arm) with every number and its n.
* ``headline``: the headline cell, chosen without the samples it is reported on.
"""

from lade_bench.stats.baseline_gain import baseline_gain
from lade_bench.stats.contrast import (
    CONTRAST_COLUMNS,
    KNOBS,
    CellContrast,
    cell_contrast,
    knob_contrasts,
    speedup_ratio_by_seed,
)
from lade_bench.stats.drift import ar_drift
from lade_bench.stats.efficiency import (
    DEFAULT_VERIFICATION,
    accept_histogram,
    arm_efficiency,
    lookahead_step_tokens,
    mean_decode_step_tokens,
    tokens_per_step,
)
from lade_bench.stats.headline import (
    HEADLINE_COLUMNS,
    HEADLINE_KEYS,
    SELECTION_DECLARED,
    SELECTION_ONLY,
    SELECTION_SPLIT,
    choose_headline,
    declared_cells,
    headline_rows,
    headline_summary,
    sample_halves,
)
from lade_bench.stats.modes import COMPILED, EAGER, mode_label, require_one_mode, row_compiled
from lade_bench.stats.pooled import pooled_units
from lade_bench.stats.quality import (
    CORPUS_BLEU,
    MEAN_METRICS,
    MISMATCH_SUMMARY,
    REFERENCE_METRICS,
    ROUGE_COLUMNS,
    corpus_bleu_of,
    mean_estimate,
    mismatch_summary,
    per_key_quality,
    quality_delta,
    quality_means,
    rescore_cut_answers,
)
from lade_bench.stats.rules import (
    BOOT_SEED,
    CONFIDENCE,
    MIN_CI_UNITS,
    N_BOOT,
    NOTE_BASELINE,
    NOTE_NO_PAIRS,
    Estimate,
    IntervalSettings,
    interval_note,
)
from lade_bench.stats.speedup import (
    BASIS_PER_TOKEN,
    BASIS_WALL_TIME,
    VERDICT_CANNOT_TELL,
    VERDICT_FASTER,
    VERDICT_SLOWER,
    per_sample_mean,
    speedup_basis,
    speedup_estimate,
    speedup_verdict,
)
from lade_bench.stats.summary import (
    CELL_ATTRIBUTES,
    CELL_KEY,
    CLOCK_COLUMNS,
    SUMMARY_COLUMNS,
    cell_attributes,
    plain_value,
    sort_summary,
    sorted_arms,
    summarize,
    summarize_cell,
)
from lade_bench.stats.text_health import (
    HEALTH_SUMMARY,
    health_means,
    loop_free_rows,
    loop_free_speedup,
    with_text_health,
)
from lade_bench.stats.units import (
    BASELINE_ARM,
    PAIR_KEY,
    SAMPLE_KEY,
    TOTALS_COLUMNS,
    UNIT_COLUMN,
    common_keys,
    common_rows,
    ok_rows,
    per_sample_totals,
    speedup_baseline,
)

__all__ = [
    "ar_drift",
    "cell_contrast",
    "speedup_ratio_by_seed",
    "knob_contrasts",
    "CellContrast",
    "CONTRAST_COLUMNS",
    "KNOBS",
    "baseline_gain",
    "BASELINE_ARM",
    "BASIS_PER_TOKEN",
    "BASIS_WALL_TIME",
    "BOOT_SEED",
    "CELL_ATTRIBUTES",
    "CELL_KEY",
    "CLOCK_COLUMNS",
    "COMPILED",
    "CONFIDENCE",
    "DEFAULT_VERIFICATION",
    "EAGER",
    "HEADLINE_COLUMNS",
    "HEALTH_SUMMARY",
    "HEADLINE_KEYS",
    "MEAN_METRICS",
    "MIN_CI_UNITS",
    "MISMATCH_SUMMARY",
    "NOTE_BASELINE",
    "NOTE_NO_PAIRS",
    "N_BOOT",
    "PAIR_KEY",
    "REFERENCE_METRICS",
    "CORPUS_BLEU",
    "corpus_bleu_of",
    "rescore_cut_answers",
    "ROUGE_COLUMNS",
    "SAMPLE_KEY",
    "SELECTION_DECLARED",
    "SELECTION_ONLY",
    "SELECTION_SPLIT",
    "SUMMARY_COLUMNS",
    "TOTALS_COLUMNS",
    "UNIT_COLUMN",
    "Estimate",
    "IntervalSettings",
    "accept_histogram",
    "arm_efficiency",
    "cell_attributes",
    "choose_headline",
    "common_keys",
    "common_rows",
    "declared_cells",
    "headline_rows",
    "headline_summary",
    "health_means",
    "interval_note",
    "lookahead_step_tokens",
    "loop_free_rows",
    "loop_free_speedup",
    "mean_decode_step_tokens",
    "mean_estimate",
    "mismatch_summary",
    "mode_label",
    "ok_rows",
    "per_key_quality",
    "per_sample_mean",
    "per_sample_totals",
    "pooled_units",
    "plain_value",
    "quality_delta",
    "quality_means",
    "require_one_mode",
    "row_compiled",
    "sample_halves",
    "sort_summary",
    "speedup_baseline",
    "sorted_arms",
    "speedup_basis",
    "speedup_estimate",
    "speedup_verdict",
    "VERDICT_CANNOT_TELL",
    "VERDICT_FASTER",
    "VERDICT_SLOWER",
    "summarize",
    "summarize_cell",
    "tokens_per_step",
    "with_text_health",
]
