"""Task accuracy: GSM8K final-answer matching and match rates.

GSM8K gold answers end with ``#### <number>``. A model's answer is read the way most GSM8K harnesses
read it: the number after the last ``####`` if the model used that form, otherwise the last number in
the text. The last-number fallback is taken only for an output that ended by itself: an output cut at
the ``max_new_tokens`` cap stops wherever the budget fell, and its last number is whatever it was
computing then (the committed SmolLM2 Spec-Bench math row that "scored" 1.0 was such an output), so a
cut output is credited only for an explicit ``#### <number>`` answer. Numbers are compared as exact
decimals after removing thousands separators and a currency sign, so "$1,234.50", "1234.5" and
"1234.50" are equal and no float rounding is involved.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

import numpy as np

# A number: optional minus, optional "$", then either comma-grouped thousands or plain digits, then an
# optional decimal part. The look-behind keeps the "-" of ranges/expressions ("10-20", "5-3") and
# digits glued to words ("x2", "v1.2") from being read as numbers or signs.
_NUMBER = re.compile(r"(?<![\w.])(?P<sign>-)?\$?(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<frac>\.\d+)?")
_HASHES = "####"


def _to_decimal(match: re.Match[str]) -> Decimal:
    text = (match.group("sign") or "") + match.group("int").replace(",", "") + (match.group("frac") or "")
    return Decimal(text)


def extract_final_number(text: str, *, fallback: bool = True) -> Decimal | None:
    """The final numeric answer in ``text``, or None if it contains no number.

    If ``text`` contains ``####`` (GSM8K's answer form), the first number after the last ``####`` is
    taken; otherwise, with ``fallback``, the last number in the text (without it: None). Commas used as
    thousands separators and ``$`` are dropped; a leading ``-`` makes the number negative.

    Examples: ``"... #### 72"`` -> 72; ``"It costs $1,234.50."`` -> 1234.50; ``"drops to -5 degrees"``
    -> -5; ``"no digits"`` -> None.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    if _HASHES in text:
        after = text.rsplit(_HASHES, 1)[1]
        match = _NUMBER.search(after)
        if match is not None:
            return _to_decimal(match)
    if not fallback:
        return None
    matches = list(_NUMBER.finditer(text))
    if not matches:
        return None
    try:
        return _to_decimal(matches[-1])
    except InvalidOperation:  # pragma: no cover - the pattern only admits valid decimals
        return None


def gsm8k_correct(prediction_text: str, gold_answer_text: str, *, ended: bool = True) -> bool:
    """Whether a model's GSM8K answer has the same final number as the gold answer.

    Args:
        prediction_text: the model's full answer text.
        gold_answer_text: the dataset's ``answer`` field (reasoning ending in ``#### <number>``) or just
            the number.
        ended: whether the output ended by itself; False for one cut at the ``max_new_tokens`` cap
            (``metrics.text_health.hit_cap``, a row's ``at_cap``), whose last number is no answer: then only an
            explicit ``#### <number>`` counts.

    Returns:
        True iff both final numbers exist and are equal as decimals.

    Raises:
        ValueError: if the gold answer contains no number (a data problem, not a wrong prediction).
    """
    gold = extract_final_number(gold_answer_text)
    if gold is None:
        raise ValueError(f"gold answer has no number: {gold_answer_text[-200:]!r}")
    predicted = extract_final_number(prediction_text, fallback=ended)
    return predicted is not None and predicted == gold


def cut_answer_credit(accuracy: float, prediction_text: str) -> float:
    """A stored final-answer ``accuracy`` of an output cut at the cap, as :func:`gsm8k_correct` with
    ``ended=False`` scores it, without the gold answer: rows scored before the rule kept their fallback
    credit.

    A credited output (1.0) keeps it only where it has an explicit ``#### <number>``: then that number was
    what matched the gold (the fallback is taken only without one). Otherwise its credit came from its last
    number, which a cut output does not have as an answer: 0.0. 0.0 and NaN stay as they are.
    """
    if accuracy != 1.0:
        return accuracy
    return 1.0 if extract_final_number(prediction_text, fallback=False) is not None else 0.0


def match_rate(flags: Sequence[bool] | np.ndarray) -> float:
    """Fraction of True values (accuracy, pass@1 with one sample, ``matches_ar`` rate).

    Args:
        flags: shape (n_samples,), booleans.

    Raises:
        ValueError: on empty input or non-boolean values.
    """
    arr = np.asarray(flags)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"flags must be a non-empty 1-D sequence of booleans, got shape {arr.shape}")
    if arr.dtype != np.bool_:
        if not np.all(np.isin(arr, (0, 1))):
            raise ValueError(f"flags must be booleans, got values such as {arr[~np.isin(arr, (0, 1))][0]!r}")
        arr = arr.astype(bool)
    return float(arr.mean())
