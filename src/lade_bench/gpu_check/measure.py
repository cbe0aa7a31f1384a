"""Run decoding arms over prompts (the one timing harness, within a deadline) and judge mismatches.

Order, warm-up, pairing and the deadline are ``runner.timing``'s, as in the runner and ``bench``.
Mismatch margins are computed after all timing, one forward each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from lade_bench.decoding import DecodeResult
from lade_bench.decoding.core.divergence import divergence_margins
from lade_bench.runner.timing import PairedRuns, run_paired

Arm = Callable[[list[int]], DecodeResult]


@dataclass(frozen=True)
class Mismatch:
    """A generation whose ids differ from AR's on the same prompt, with the margins where it diverges.

    ``ar_margin``: AR's top-1 minus top-2 logit there; ``arm_margin``: AR's token's logit minus the
    arm's token's; ``engine_error``: ``arm_margin`` above the tolerance (not a near-tie).
    """

    arm: str
    prompt_index: int
    index: int
    ar_margin: float
    arm_margin: float
    engine_error: bool


def run_arms(
    arms: dict[str, Arm], prompts: Sequence[list[int]], *, warmup: int, deadline: float
) -> PairedRuns[DecodeResult]:
    """Every arm on every prompt (``runner.timing.run_paired``) until ``deadline`` (time.monotonic).

    Args:
        arms: name -> generation function; must contain "ar".
        prompts: prompt ids.
        warmup: untimed generations of every arm on the first prompt first.
        deadline: no new prompt starts after this ``time.monotonic()`` value (the first always runs).
    """
    return run_paired(arms, prompts, warmup=warmup, deadline=deadline)


def find_mismatches(
    model: torch.nn.Module, prompts: Sequence[list[int]], runs: PairedRuns[DecodeResult], tolerance: float
) -> list[Mismatch]:
    """Every non-AR generation that differs from AR's on its prompt, with its margins (untimed)."""
    found = []
    ar = runs.results["ar"]
    for arm, results in runs.results.items():
        if arm == "ar":
            continue
        for index, (result, reference) in enumerate(zip(results, ar, strict=True)):
            divergence = divergence_margins(model, prompts[index], reference.tokens, result.tokens)
            if divergence is None:
                continue
            found.append(
                Mismatch(
                    arm,
                    index,
                    divergence.index,
                    divergence.ar_margin,
                    divergence.other_margin,
                    divergence.exceeds(tolerance),
                )
            )
    return found


def logits_are_finite(model: torch.nn.Module, prompt: list[int]) -> bool:
    """False when one forward over ``prompt`` yields inf/NaN logits (e.g. fp16 overflow in activations)."""
    with torch.no_grad():
        ids = torch.tensor([prompt], device=next(model.parameters()).device)
        return bool(torch.isfinite(model(input_ids=ids, use_cache=False).logits).all())
