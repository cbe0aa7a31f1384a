"""Declared metrics: name and how per-sample values aggregate (after lm-evaluation-harness).

Each per-sample results column that is a metric is declared once here, so that reports aggregate
every metric the same way. Aggregations:

* ``mean``: the mean of a per-sample column (ROUGE, pass, accuracy, ``matches_ar``).
* ``ratio_of_sums``: ``sum(numerator) / sum(denominator)`` over samples (speedup, compression,
  throughput), as the conventions require; see :mod:`lade_bench.metrics.speed` for why.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Aggregation = Literal["mean", "ratio_of_sums"]


@dataclass(frozen=True)
class MetricSpec:
    """One declared metric.

    Attributes:
        name: metric name as it appears in aggregate outputs.
        aggregation: ``"mean"`` or ``"ratio_of_sums"``.
        columns: the per-sample result columns (names as in ``lade_bench.results.schema``) it is
            computed from: one for ``mean``, ``(numerator, denominator)`` for ``ratio_of_sums``. For
            speedup both are ``wall_time_s``: of the AR row and of the paired non-AR row.
        description: one line for reports.
    """

    name: str
    aggregation: Aggregation
    columns: tuple[str, ...]
    description: str = ""

    def __post_init__(self) -> None:
        """Check that the number of columns fits the aggregation."""
        expected = {"mean": 1, "ratio_of_sums": 2}.get(self.aggregation)
        if expected is None:
            raise ValueError(f"metric {self.name!r}: unknown aggregation {self.aggregation!r}")
        if len(self.columns) != expected:
            raise ValueError(
                f"metric {self.name!r}: aggregation {self.aggregation!r} needs {expected} column(s), "
                f"got {self.columns!r}"
            )

    def aggregate(self, *values: Sequence[float] | np.ndarray) -> float:
        """Aggregate per-sample values: one array for ``mean``, (numerator, denominator) for ratios.

        Args:
            values: arrays of shape (n_samples,), in the order of :attr:`columns`.

        Raises:
            ValueError: on a wrong number of arrays, empty or mismatched arrays, or a zero denominator.
        """
        if len(values) != len(self.columns):
            raise ValueError(f"metric {self.name!r} aggregates {self.columns!r}; got {len(values)} array(s)")
        arrays = [np.asarray(v, dtype=np.float64) for v in values]
        for col, arr in zip(self.columns, arrays, strict=True):
            if arr.ndim != 1 or arr.size == 0:
                raise ValueError(f"metric {self.name!r}: column {col!r} must be non-empty 1-D, got {arr.shape}")
        if self.aggregation == "mean":
            return float(arrays[0].mean())
        num, den = arrays
        if num.shape != den.shape:
            raise ValueError(f"metric {self.name!r}: {self.columns!r} lengths {num.size} != {den.size}")
        if den.sum() == 0:
            raise ValueError(f"metric {self.name!r}: sum of {self.columns[1]!r} is zero")
        return float(num.sum() / den.sum())


_SPECS = (
    MetricSpec("speedup", "ratio_of_sums", ("wall_time_s", "wall_time_s"),
               "sum of AR wall_time_s / sum of the paired arm's wall_time_s"),
    MetricSpec("compression_ratio", "ratio_of_sums", ("new_tokens", "decode_steps"),
               "generated tokens per decoding forward pass"),
    MetricSpec("tokens_per_s", "ratio_of_sums", ("new_tokens", "wall_time_s"),
               "generated tokens per second of wall time"),
    MetricSpec("wall_time_s", "mean", ("wall_time_s",), "mean wall time per sample"),
    MetricSpec("rouge1", "mean", ("rouge1",), "ROUGE-1 F-measure"),
    MetricSpec("rouge2", "mean", ("rouge2",), "ROUGE-2 F-measure"),
    MetricSpec("rougeL", "mean", ("rougeL",), "ROUGE-L F-measure"),
    MetricSpec("rougeLsum", "mean", ("rougeLsum",), "summary-level ROUGE-L F-measure"),
    MetricSpec("pass@1", "mean", ("passed",), "fraction of completions passing their tests"),
    MetricSpec("accuracy", "mean", ("accuracy",), "task accuracy (e.g. GSM8K final-number match)"),
    # The mean of sentence BLEU, named so: corpus BLEU (stats.quality_means' corpus_bleu) is another number.
    MetricSpec("sentence_bleu", "mean", ("bleu",), "mean of sentence BLEU (sacrebleu, 0-100), not corpus BLEU"),
    MetricSpec("chrf", "mean", ("chrf",), "sentence chrF (sacrebleu, 0-100) against the references"),
    MetricSpec("exact_match", "mean", ("exact_match",), "normalised answer equal to a gold answer (SQuAD)"),
    MetricSpec("token_f1", "mean", ("token_f1",), "best token F1 over the gold answers (SQuAD)"),
    MetricSpec("matches_ar", "mean", ("matches_ar",), "fraction of greedy outputs token-equal to AR"),
)  # fmt: skip

METRICS: dict[str, MetricSpec] = {spec.name: spec for spec in _SPECS}


def get_metric(name: str) -> MetricSpec:
    """Look up a declared metric by name.

    Raises:
        KeyError: for an unknown name, suggesting the closest declared names.
    """
    try:
        return METRICS[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(METRICS), n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise KeyError(f"unknown metric {name!r}{hint} Known: {sorted(METRICS)}") from None
