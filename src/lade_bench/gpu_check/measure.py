"""Run decoding arms over prompts (arms alternated per prompt, within a deadline) and judge mismatches.

Every arm decodes every prompt before the next prompt starts, so a deadline never leaves a prompt that
some arms have and others lack. Mismatch margins are computed after all timing, one forward each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from lade_bench.decoding import DecodeResult
from lade_bench.decoding.divergence import divergence_margins

Arm = Callable[[list[int]], DecodeResult]


@dataclass
class ArmRuns:
    """What the arms produced on the prompts they all completed.

    Attributes:
        results: arm name -> one DecodeResult per completed prompt, in prompt order.
        prompts_done: how many prompts every arm completed.
        stopped_early: True when the deadline stopped the loop before the last prompt.
    """

    results: dict[str, list[DecodeResult]] = field(default_factory=dict)
    prompts_done: int = 0
    stopped_early: bool = False


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


def run_arms(arms: dict[str, Arm], prompts: Sequence[list[int]], *, warmup: int, deadline: float) -> ArmRuns:
    """Every arm on every prompt, the arm order rotated per prompt, until ``deadline`` (time.monotonic).

    Args:
        arms: name -> generation function; must contain "ar".
        prompts: prompt ids.
        warmup: untimed generations of every arm on the first prompt first.
        deadline: no new prompt starts after this ``time.monotonic()`` value (the first always runs).
    """
    names = list(arms)
    for name in names:
        for _ in range(warmup):
            arms[name](prompts[0])
    runs = ArmRuns(results={name: [] for name in names})
    for index, prompt in enumerate(prompts):
        if index > 0 and time.monotonic() > deadline:
            runs.stopped_early = True
            break
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            runs.results[name].append(arms[name](prompt))
        runs.prompts_done = index + 1
    return runs


def find_mismatches(
    model: torch.nn.Module, prompts: Sequence[list[int]], runs: ArmRuns, tolerance: float
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
