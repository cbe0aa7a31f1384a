"""What every multi-token decoding loop shares: the tokens chosen per forward and the output so far.

The lookahead loop (``lookahead.py``) and the static prompt lookup loop (``drafters/prompt_lookup.py``)
differ in where their candidates come from; choosing a forward's tokens (greedy, or sampling that
keeps the target distribution) and emitting them (cut at a stop id and the budget) is the same.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from lade_bench.decoding.core.executor import StepOutput
from lade_bench.decoding.core.params import SamplingParams, truncate_at_stop
from lade_bench.decoding.core.sampling import build_warpers, warped_probabilities
from lade_bench.decoding.core.verify import Verification, verify_greedy, verify_sampling


class TokenChoice:
    """Greedy or sampled choice of a forward's tokens, from one generator seeded per generation."""

    def __init__(self, sampling: SamplingParams, seed: int) -> None:
        """Greedy unless ``sampling.do_sample``; ``seed`` seeds every draw (and whatever else reads ``generator``)."""
        self.generator = torch.Generator().manual_seed(seed)
        self.warpers = build_warpers(sampling) if sampling.do_sample else None

    @property
    def samples(self) -> bool:
        """True when tokens are drawn rather than argmaxed (verification then needs logits)."""
        return self.warpers is not None

    def first(self, logits: torch.Tensor) -> int:
        """The token after the prompt, from the prefill's last logit row."""
        if self.warpers is None:
            return int(logits.argmax())
        probabilities = warped_probabilities(logits, self.warpers)
        return int(torch.multinomial(probabilities.cpu(), 1, generator=self.generator))

    def verify(self, step: StepOutput, candidates: Sequence[Sequence[int]]) -> Verification:
        """The step's accepted tokens, the winning candidate and how many of its tokens matched."""
        if self.warpers is None:
            return verify_greedy(step.predictions, candidates, step.candidate_rows)
        probabilities = functools.partial(self._probabilities, step.logits)
        return verify_sampling(probabilities, candidates, step.candidate_rows, self.generator)

    def _probabilities(self, logits: torch.Tensor | None, row: int) -> torch.Tensor:
        """Warped target distribution of logit row ``row`` (a fresh tensor: verification edits it)."""
        assert self.warpers is not None and logits is not None  # sampling steps keep their logits
        return warped_probabilities(logits[row], self.warpers)


class Emitted:
    """A generation's output so far: its tokens, prompt + tokens, and the tokens of each forward."""

    def __init__(self, prompt: Sequence[int], max_new_tokens: int, stop_ids: frozenset[int]) -> None:
        """Nothing emitted yet after ``prompt``; at most ``max_new_tokens``, ending after a stop id."""
        self.tokens: list[int] = []
        # prompt + tokens, kept incrementally because candidates are read across the boundary.
        self.sequence: list[int] = list(prompt)
        self.accept_lengths: list[int] = []
        self._max_new_tokens = max_new_tokens
        self._stop_ids = stop_ids

    def finishes(self, accepted: list[int]) -> bool:
        """Whether emitting ``accepted`` would end the generation (a stop id or the budget), emitting nothing."""
        return truncate_at_stop(accepted, self._max_new_tokens - len(self.tokens), self._stop_ids)[1]

    def emit(self, accepted: list[int]) -> bool:
        """Append one forward's tokens, cut at a stop id and the budget; True when generation is over."""
        kept, finished = truncate_at_stop(accepted, self._max_new_tokens - len(self.tokens), self._stop_ids)
        self.tokens.extend(kept)
        self.sequence.extend(kept)
        self.accept_lengths.append(len(kept))
        return finished
