"""Spec-Bench's own arithmetic on answer files (``evaluation/speed.py``), in one place.

Spec-Bench (Xia et al., ACL 2024 Findings; hemingkx/Spec-Bench ``evaluation/speed.py`` at fd2c1cd,
function ``speed``) reports, per category group and overall:

- the speedup: the mean over the method's questions of ``sum(new_tokens) / sum(wall_time)`` of its
  first choice, over the same mean of the baseline's questions, where each baseline question's tokens
  are re-counted from its text, ``len(tokenizer(turn).input_ids) - 1`` per turn. The ``- 1`` removes
  a BOS the tokenizer prepends; for a tokenizer that prepends none (SmolLM2's) it drops a real token
  of every turn, and a stop token the text does not show is not counted either;
- tau, "mean accepted tokens": the mean of every step's ``accept_lengths``, the prefill's first token
  included as a step of 1.

This differs from the suite's paired statistic (``stats.speedup_estimate``: summed wall times of the
same questions, method over AR of its own cell; tokens per decode step without the prefill): a mean
of per-question rates weights each question by its AR speed rather than its time. Both the
leaderboard's external rows and its speed.py columns for our own cells are computed here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# A baseline turn's text -> the tokens speed.py counts for it; None: the turn's recorded new_tokens.
TurnCounter = Callable[[str], int]


@dataclass(frozen=True)
class SpeedPyResult:
    """speed.py's numbers for one method over its baseline on one set of questions.

    Attributes:
        speedup: mean method tokens/s over mean baseline tokens/s (per question, first choice).
        tau: mean of the method's ``accept_lengths`` (the prefill's step included); NaN without steps.
        n_questions: the method's questions averaged over.
    """

    speedup: float
    tau: float
    n_questions: int


def turn_token_counter(tokenizer: Any) -> TurnCounter:
    """speed.py's count of a baseline turn with ``tokenizer``: ``len(tokenizer(turn).input_ids) - 1``.

    Each text is tokenised once (a report asks for the same AR turns per method and group).
    """
    return functools.cache(lambda turn: len(tokenizer(turn).input_ids) - 1)


def mean_tokens_per_second(records: Sequence[dict[str, Any]], count_turn: TurnCounter | None = None) -> float:
    """The mean over ``records`` (answer records) of their first choice's tokens over its summed wall time.

    Args:
        count_turn: the tokens of each turn counted from its text (speed.py's baseline count,
            :func:`turn_token_counter`); None: the choice's recorded ``new_tokens`` (speed.py's count
            of the method's side).
    """
    rates = []
    for record in records:
        choice = record["choices"][0]
        tokens = sum(count_turn(t) for t in choice["turns"]) if count_turn else sum(choice["new_tokens"])
        rates.append(tokens / sum(choice["wall_time"]))
    return float(np.mean(rates))


def speed_py(
    method: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]], count_turn: TurnCounter | None = None
) -> SpeedPyResult:
    """speed.py's speedup and tau of ``method``'s answer records over ``baseline``'s (the same category
    group's records of each file; they need not be the same questions, as in speed.py).

    Args:
        count_turn: speed.py's baseline re-count (:func:`turn_token_counter` of the model's tokenizer);
            None where no tokenizer is at hand: the baseline's recorded ``new_tokens`` (speed.py's number
            then differs by the re-count, a token per turn for a tokenizer without BOS).
    """
    accepted = [a for record in method for a in record["choices"][0]["accept_lengths"]]
    return SpeedPyResult(
        speedup=mean_tokens_per_second(method) / mean_tokens_per_second(baseline, count_turn),
        tau=float(np.mean(accepted)) if accepted else float("nan"),
        n_questions=len(method),
    )
