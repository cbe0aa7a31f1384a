"""The 2D lookahead window: N-1 levels of Jacobi guesses, W columns in steady state.

Level l, column j holds the guess for position p + l + j, where p is the position of the current
token ``cur`` (level 0, column 0, supplied by the caller each step, so level 0 stores columns 1..C-1).
Each step slides the window by one column whatever was accepted, as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class LookaheadWindow:
    """Holds the levels of guesses and applies the Jacobi update after each forward pass.

    Warm-up (official behaviour): level 0 starts with W + N - 3 guesses (C = W + N - 2 columns with
    ``cur``) and only one level; each warm-up step adds the new predictions as a level and drops one
    column, so after N - 2 steps the window has N - 1 levels of W columns. The first of these updates
    comes from the prefill forward, which carries the initial guesses after the prompt.
    """

    def __init__(self, ngram: int, window: int, initial_guesses: Sequence[int]) -> None:
        """Start the window from ``initial_guesses`` (exactly W + N - 3 tokens)."""
        expected = window + ngram - 3
        if len(initial_guesses) != expected:
            raise ValueError(f"the window needs {expected} initial guesses, got {len(initial_guesses)}")
        self.ngram = ngram
        self.width = window
        # levels[0] stores columns 1..C-1 (column 0 is cur); levels[l >= 1] store columns 0..C-1.
        self.levels: list[list[int]] = [list(initial_guesses)]

    @property
    def num_levels(self) -> int:
        """Levels present now (1 at the start, N - 1 once warmed up)."""
        return len(self.levels)

    @property
    def num_columns(self) -> int:
        """Columns C of every level, ``cur`` included in level 0."""
        return len(self.levels[0]) + 1

    @property
    def is_full(self) -> bool:
        """True once all N - 1 levels exist, i.e. the window yields n-grams."""
        return self.num_levels == self.ngram - 1

    def input_tokens(self, cur: int) -> list[int]:
        """Window tokens in input order: cur, level 0, then levels 1.. row by row."""
        out = [cur]
        for level in self.levels:
            out.extend(level)
        return out

    def ngrams(self, cur: int, last_level_predictions: Sequence[int]) -> list[list[int]]:
        """The W n-grams of a full window: each column's vertical trajectory plus its prediction."""
        if not self.is_full:
            return []
        columns = [[cur, *self.levels[0]], *self.levels[1:]]
        return [[level[j] for level in columns] + [last_level_predictions[j]] for j in range(self.num_columns)]

    def update(self, last_level_predictions: Sequence[int]) -> None:
        """Jacobi update with the argmax predictions of the last level's C rows (in column order)."""
        predictions = list(last_level_predictions)
        if self.is_full:
            # Steady state: every level moves down one, the predictions become the top level, and
            # the old level 1's column 0 is dropped because that position is now cur's.
            shifted = [*self.levels[1:], predictions]
            shifted[0] = shifted[0][1:]
            self.levels = shifted
        else:
            # Warm-up: slide each level left by one column and add the predictions as a new level.
            self.levels = [level[1:] for level in self.levels] + [predictions[1:]]


def initial_guesses(prompt: Sequence[int], count: int, generator: torch.Generator) -> list[int]:
    """Draw ``count`` window tokens uniformly from the prompt, reproducibly from ``generator``.

    Prompt tokens are far better first guesses than random vocabulary ids (official behaviour);
    drawing through a seeded torch generator makes the whole run reproducible.
    """
    if count == 0:
        return []
    picks = torch.randint(0, len(prompt), (count,), generator=generator)
    return [int(prompt[i]) for i in picks.tolist()]
