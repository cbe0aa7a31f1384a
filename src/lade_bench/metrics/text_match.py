"""Reference-based text metrics of Spec-Bench's scored tasks: BLEU and chrF (translation), exact match
and token F1 (open-domain QA).

BLEU and chrF are sacrebleu's sentence-level scores with its default settings (13a tokenisation, exponential
smoothing for BLEU; character 6-grams, beta 2 for chrF), so a reader can reproduce any row with ``sacrebleu``
alone; they are reported on sacrebleu's 0-100 scale. A mean of sentence BLEU is not BLEU as MT papers report
it: BLEU is a corpus statistic (n-gram matches and lengths summed over the sentences, then one score), and on
short or run-on outputs the two differ widely (the committed Gemma-3-270M translations: sentence mean 0.42,
corpus 0.15). So each row also keeps its sentence's BLEU sufficient statistics (:func:`bleu_statistics`), from
which :func:`corpus_bleu` gives sacrebleu's ``corpus_bleu`` of any set of rows exactly; reports name the two
"sentence BLEU (mean)" and "corpus BLEU". Exact match and token F1 follow the SQuAD evaluation script
(Rajpurkar et al. 2016; the normalisation Natural Questions reports use): lower case, punctuation and the
articles a/an/the removed, whitespace collapsed, and the best score over the gold alternatives.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def bleu(prediction: str, references: Sequence[str]) -> float:
    """sacrebleu's sentence BLEU (0-100) of ``prediction`` against ``references``."""
    import sacrebleu

    return float(sacrebleu.sentence_bleu(prediction, list(references)).score)


def bleu_statistics(prediction: str, references: Sequence[str]) -> list[int]:
    """sacrebleu's BLEU sufficient statistics of one sentence (13a tokenisation, 4-grams).

    ``[hypothesis length, closest reference length, matches of 1..4-grams, 1..4-grams of the
    hypothesis]``: summed over sentences they are what ``sacrebleu.corpus_bleu`` scores
    (:func:`corpus_bleu`). sacrebleu has no public per-sentence form, so its own extraction is called.
    """
    from sacrebleu.metrics import BLEU

    # One sentence; each reference is a stream of one sentence (sacrebleu's corpus layout).
    stats = BLEU()._extract_corpus_statistics([prediction], [[r] for r in references])
    return [int(v) for v in stats[0]]


def corpus_bleu(statistics: Sequence[Sequence[int]]) -> float:
    """Corpus BLEU (0-100) of the sentences whose :func:`bleu_statistics` are given: sacrebleu's
    ``corpus_bleu`` of those sentences, to the last digit (summed statistics, its default exponential
    smoothing).

    Raises:
        ValueError: no statistics, or one that is not the 10 counts of :func:`bleu_statistics`.
    """
    from sacrebleu.metrics import BLEU

    rows = [list(s) for s in statistics]
    if not rows or any(len(s) != 10 for s in rows):
        raise ValueError(f"corpus_bleu needs one or more lists of 10 BLEU counts, got {len(rows)} row(s)")
    total = [sum(column) for column in zip(*rows, strict=True)]
    return float(BLEU.compute_bleu(total[2:6], total[6:10], total[0], total[1], smooth_method="exp").score)


def chrf(prediction: str, references: Sequence[str]) -> float:
    """sacrebleu's sentence chrF (0-100) of ``prediction`` against ``references``."""
    import sacrebleu

    return float(sacrebleu.sentence_chrf(prediction, list(references)).score)


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = _ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION))
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer, else 0.0.

    Raises:
        ValueError: ``golds`` is empty (a data problem, not a wrong answer).
    """
    if not golds:
        raise ValueError("exact_match needs at least one gold answer")
    ours = normalize_answer(prediction)
    return float(any(ours == normalize_answer(gold) for gold in golds))


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """The best SQuAD token F1 (0..1) of the prediction over the gold answers.

    Raises:
        ValueError: ``golds`` is empty.
    """
    if not golds:
        raise ValueError("token_f1 needs at least one gold answer")
    ours = normalize_answer(prediction).split()
    return max(_f1(ours, normalize_answer(gold).split()) for gold in golds)


def _f1(ours: list[str], gold: list[str]) -> float:
    if not ours or not gold:
        # SQuAD's rule: two empty answers agree, one empty answer scores 0.
        return float(ours == gold)
    common = sum((Counter(ours) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(ours), common / len(gold)
    return 2 * precision * recall / (precision + recall)
