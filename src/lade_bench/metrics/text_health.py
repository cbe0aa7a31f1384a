"""Text health of one output: how repetitive it is, whether it ends in a loop, whether it hit the cap.

Pure functions of a row's generated token ids (``output_ids``), so the runner records them on every
row and a report computes the same numbers from rows written before the columns existed (issue 63:
the committed tiny-model outputs were mostly loops, and the speedups came from the loops).

* **repeated-4-gram share**: of the output's token 4-grams (one per start position), the share that
  repeat a 4-gram starting earlier in the same output. It equals ``1 - distinct-4`` exactly (each
  distinct 4-gram has one first occurrence; every other occurrence is a repeat); both are recorded
  because the literature reports distinct-n and the issue reported the repeated share.
* **distinct-4**: distinct token 4-grams over all token 4-grams of the output.
* **loop start**: the token index where the output's final exact loop starts, or None. An output *ends
  in a loop* when a suffix of it is periodic (``ids[i] == ids[i + p]`` throughout) with at least
  :data:`LOOP_MIN_REPEATS` full periods and at least :data:`LOOP_MIN_TOKENS` tokens; the loop is the
  longest such suffix over every period ``p`` (ties: the shortest period), its start is
  ``len(ids) - len(suffix)``. Two full periods is the least that shows a block repeating; 16 tokens
  keeps a short tail (a word doubled, a closing ``)))``) from counting as a loop, while the loops the
  issue measured (median longest repeat 76.5 of 128 tokens) are far longer. A trailing stop token
  breaks the suffix: an output that left its loop by ending did not end in one.
* **at cap**: the output stopped at its budget: ``max_new_tokens`` tokens, the last not a stop id
  (every method emits the stop id that ends a turn, then stops).

Lengths under 4 tokens have no 4-gram: both shares are NaN there (undefined, not 0 or 1).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

# The n-gram order of both repetition measures (the "token 4-grams").
NGRAM = 4
# A loop: at least two full periods of a block, covering at least 16 tokens (see the module docstring).
LOOP_MIN_REPEATS = 2
LOOP_MIN_TOKENS = 16

# The row columns (lade_bench.results.schema) these functions fill, in schema order.
REPEATED_SHARE = "repeated_4gram_share"
DISTINCT = "distinct_4"
LOOP_START = "loop_start"
AT_CAP = "at_cap"
TEXT_HEALTH_COLUMNS: tuple[str, ...] = (REPEATED_SHARE, DISTINCT, LOOP_START, AT_CAP)


def _ngrams(ids: Sequence[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]


def repeated_ngram_share(ids: Sequence[int], n: int = NGRAM) -> float:
    """Share of the output's token ``n``-grams that repeat an ``n``-gram starting earlier in it (NaN: none)."""
    grams = _ngrams(list(ids), n)
    if not grams:
        return math.nan
    return (len(grams) - len(set(grams))) / len(grams)


def distinct_n(ids: Sequence[int], n: int = NGRAM) -> float:
    """Distinct token ``n``-grams over all token ``n``-grams of the output (NaN: shorter than ``n``)."""
    grams = _ngrams(list(ids), n)
    if not grams:
        return math.nan
    return len(set(grams)) / len(grams)


def loop_start(
    ids: Sequence[int], min_repeats: int = LOOP_MIN_REPEATS, min_tokens: int = LOOP_MIN_TOKENS
) -> int | None:
    """The token index where the output's final exact loop starts, or None when it does not end in one.

    The loop is the longest periodic suffix with at least ``min_repeats`` full periods and at least
    ``min_tokens`` tokens, over every period (ties: the shortest period); see the module docstring.
    """
    arr = np.asarray(list(ids), dtype=np.int64)
    n = len(arr)
    best = 0
    if n < 2:
        return None
    # A period p can only close a periodic suffix where the last token equals the one p before it.
    periods = (n - 1) - np.flatnonzero(arr[:-1] == arr[-1])
    for period in sorted(int(p) for p in periods if p * min_repeats <= n):
        # Trailing run of positions i with arr[i] == arr[i + period]: the periodic suffix is that run
        # plus one period.
        same = arr[:-period] == arr[period:]
        mismatches = np.flatnonzero(~same)
        run = len(same) if len(mismatches) == 0 else len(same) - 1 - int(mismatches[-1])
        length = run + period
        if length >= min_repeats * period and length >= min_tokens and length > best:
            best = length
    return n - best if best else None


def hit_cap(ids: Sequence[int], max_new_tokens: int, stop_ids: Collection[int]) -> bool:
    """The output stopped at its budget: ``max_new_tokens`` (or more) tokens, the last not a stop id."""
    return len(ids) >= max_new_tokens and (not len(ids) or int(ids[-1]) not in stop_ids)


def text_health(ids: Sequence[int], max_new_tokens: int, stop_ids: Collection[int]) -> dict[str, Any]:
    """The four text-health row columns (:data:`TEXT_HEALTH_COLUMNS`) of one output."""
    ids = [int(i) for i in ids]
    return {
        REPEATED_SHARE: repeated_ngram_share(ids),
        DISTINCT: distinct_n(ids),
        LOOP_START: loop_start(ids),
        AT_CAP: hit_cap(ids, max_new_tokens, stop_ids),
    }
