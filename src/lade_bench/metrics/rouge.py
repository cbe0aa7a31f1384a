"""ROUGE-1/2/L/Lsum F-measures through Google's ``rouge_score`` package, offline.

``evaluate.load("rouge")`` is avoided on purpose: it fetches a loading script from the Hub and fails
offline. Scores are F-measures in [0, 1] (the paper prints them x100).

rougeLsum is the summary-level LCS over sentences. ``rouge_score`` can split sentences with NLTK
(``split_summaries=True``) but that needs the ``punkt`` data download, so sentences are taken to be
the lines of the text instead; :func:`_sentence_lines` normalises them (strips, drops blank lines) so
that "\\n\\n" paragraph breaks and trailing whitespace do not change the score. Callers who want
NLTK-style sentences should put one sentence per line before scoring.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from rouge_score import rouge_scorer

ROUGE_TYPES: tuple[str, ...] = ("rouge1", "rouge2", "rougeL", "rougeLsum")


@lru_cache(maxsize=1)
def _scorer() -> rouge_scorer.RougeScorer:
    # Building the scorer constructs a Porter stemmer; do it once per process.
    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True, split_summaries=False)


def _sentence_lines(text: str) -> str:
    return "\n".join(line.strip() for line in text.split("\n") if line.strip())


def rouge_scores(prediction: str, reference: str) -> dict[str, float]:
    """ROUGE F-measures of one prediction against one reference.

    Args:
        prediction: generated text; for rougeLsum, sentences are its lines.
        reference: reference text; for rougeLsum, sentences are its lines.

    Returns:
        ``{"rouge1": f, "rouge2": f, "rougeL": f, "rougeLsum": f}``, each in [0, 1].
    """
    if not isinstance(prediction, str) or not isinstance(reference, str):
        raise TypeError(
            f"prediction and reference must be str, got {type(prediction).__name__} and {type(reference).__name__}"
        )
    scores = _scorer().score(_sentence_lines(reference), _sentence_lines(prediction))
    return {name: float(scores[name].fmeasure) for name in ROUGE_TYPES}


def rouge_corpus(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean over samples of the per-sample ROUGE F-measures (no bootstrap aggregation).

    Args:
        predictions: shape (n_samples,), generated texts.
        references: shape (n_samples,), paired reference texts.

    Returns:
        ``{rouge_type: mean F-measure}`` for the four ROUGE types, each in [0, 1].

    Raises:
        ValueError: on empty input or mismatched lengths.
    """
    if len(predictions) != len(references):
        raise ValueError(f"predictions and references must be paired: lengths {len(predictions)} != {len(references)}")
    if len(predictions) == 0:
        raise ValueError("predictions is empty; need at least one sample")
    per_sample = [rouge_scores(p, r) for p, r in zip(predictions, references, strict=True)]
    return {name: float(np.mean([s[name] for s in per_sample])) for name in ROUGE_TYPES}
