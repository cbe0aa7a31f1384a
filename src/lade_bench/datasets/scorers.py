"""Scorers that several datasets share (a dataset's own scorer lives in its module).

Metrics are imported inside the scorers: loading a dataset must not pull in ``rouge_score`` or the
sandbox, and the metrics import nothing from here.
"""

from __future__ import annotations

from typing import Any

from lade_bench.datasets.sample import Sample

# What ``metrics.rouge.rouge_scores`` returns (named here so a spec can declare it without importing rouge_score).
ROUGE_COLUMNS = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def score_rouge(answer: str, sample: Sample, allow_unsandboxed: bool) -> dict[str, Any]:
    """ROUGE F-measures of ``answer`` against ``sample.reference`` (the summarisation scorer)."""
    from lade_bench.metrics.rouge import rouge_scores

    return rouge_scores(answer, sample.reference or "")
