"""The executor seam of lookahead decoding: how a step's forward pass(es) run, separate from the loop.

The decoding loop (``lookahead.py``) owns everything that decides *which* tokens to emit: the
window, the n-gram pool, verification and stopping. An executor owns everything that decides *how*
the model computes them: the model, the KV cache, the input layout and mask of a step, and keeping
exactly the accepted entries in the cache. The loop calls, per generation:

1. :meth:`StepExecutor.prefill` once: the prompt and the window's first level in one forward;
2. per step, :meth:`StepExecutor.step` with a :class:`StepInput`, then verification on the returned
   :class:`StepOutput`, then :meth:`StepExecutor.commit` with the verdict.

Implementations: ``single_device.SingleDeviceExecutor`` (one model, one forward per step) and
``parallel.ParallelExecutor`` (lookahead parallelism over a process group). What any executor must
guarantee, so that the loop stays exact, is stated on :class:`StepExecutor`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import torch


@dataclass
class ForwardRecord:
    """What an executor's forwards cost so far, as ``DecodeResult`` reports it.

    Attributes:
        step_tokens: input tokens of each forward, prefill first (``DecodeResult.step_tokens``).
        forward_time_s: device-synchronised seconds spent inside model forwards.
    """

    step_tokens: list[int] = field(default_factory=list)
    forward_time_s: float = 0.0


@dataclass(frozen=True)
class StepInput:
    """What one lookahead step must compute, independent of how an executor lays it out.

    Attributes:
        position: position of ``cur`` (the last emitted token, not yet in the cache); the cache
            holds exactly the ``position`` accepted tokens before it.
        window_tokens: cur, then the window in input order (``LookaheadWindow.input_tokens``):
            level 0's columns 1..C-1, then levels 1.. row by row, C columns each.
        levels: the window's levels m (1 at the start, N-1 once warmed up).
        columns: the window's columns C, cur included.
        candidates: the pool's candidates for cur, in verification order, N-1 tokens each.
    """

    position: int
    window_tokens: list[int]
    levels: int
    columns: int
    candidates: list[tuple[int, ...]]


@dataclass(frozen=True)
class StepOutput:
    """What a step's forward pass(es) yield, in the order verification reads it.

    An executor returns a subclass of its own that adds what its :meth:`StepExecutor.commit` needs
    (its layout of the step); the loop reads only these fields and hands the object back to commit.

    Attributes:
        predictions: argmax of the rows verification reads; row 0 is cur's (the first token greedy
            decoding emits).
        last_level: argmax of the last window level's C rows, in column order.
        candidate_rows: for each candidate, the rows (indices into ``predictions``) of its N-1
            tokens' predictions.
        logits: the rows' logits, aligned with ``predictions``; None when the executor was built
            without them (greedy: verification reads only the argmaxes).
    """

    predictions: list[int]
    last_level: list[int]
    candidate_rows: list[list[int]]
    logits: torch.Tensor | None


StepT = TypeVar("StepT", bound=StepOutput)


class StepExecutor(Protocol[StepT]):
    """Runs a lookahead generation's forward passes on one committed KV cache.

    Contract (what keeps the loop's output exact whatever the executor):

    * every row's logits are those the model gives that token in autoregressive decoding after the
      committed cache: the step's mask and positions follow ``layout.py``'s rules, however the
      executor orders, pads, shards or compiles the inputs;
    * after :meth:`commit`, the cache holds exactly the accepted tokens' entries, in order, and
      nothing else (cur, then the winning candidate's first ``matched`` tokens);
    * ``record`` gets one ``step_tokens`` entry per forward, its input token count (prefill first),
      and ``forward_time_s`` the device-synchronised time spent inside model forwards.

    An executor with a fixed input shape (e.g. a compiled one) may pad a step's inputs, as long as
    the padding rows are masked out for every real row and ``commit`` drops their entries.
    """

    record: ForwardRecord

    def prefill(self, ids: list[int], guesses: int) -> torch.Tensor:
        """One causal forward of the prompt followed by ``guesses`` window guesses.

        Returns the logits of the last ``guesses + 1`` rows (the prompt's last row first); the
        cache keeps only the prompt's entries, exactly those of a plain prefill.
        """
        ...

    def step(self, inputs: StepInput) -> StepT:
        """Run one step: the window and the candidates on top of the committed cache."""
        ...

    def commit(self, output: StepT, position: int, winner: int, matched: int) -> None:
        """Keep cur's entry and those of the first ``matched`` tokens of candidate ``winner``.

        ``output`` is what :meth:`step` returned for the step whose cur sits at ``position``;
        ``winner`` is -1 (and ``matched`` 0) when no candidate matched.
        """
        ...
