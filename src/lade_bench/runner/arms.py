"""Dispatch from an arm name to the decoding engine, with the cell's settings filled in."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lade_bench.decoding import (
    DecodeResult,
    autoregressive_generate,
    jacobi_generate,
    lookahead_generate,
    prompt_lookup_generate,
)
from lade_bench.runner.plan import CellPlan


def generate(
    arm: str,
    model: torch.nn.Module,
    prompt_ids: Sequence[int],
    plan: CellPlan,
    stop_ids: Sequence[int],
    seed: int,
    max_new_tokens: int | None = None,
) -> DecodeResult:
    """Run one generation of ``arm`` (the engine times the generation itself, nothing else).

    Args:
        arm: "ar", "lookahead", "prompt_lookup" or "jacobi".
        model: the cell's model.
        prompt_ids: the rendered prompt.
        plan: supplies N/W/G, sampling and the optional arms' settings.
        stop_ids: EOS ids that end the turn.
        seed: the (sample, turn) seed, identical for every arm.
        max_new_tokens: defaults to the config's; warm-up passes a shorter budget.
    """
    cfg = plan.cfg
    budget = max_new_tokens or cfg.max_new_tokens
    common = dict(eos_token_id=list(stop_ids), seed=seed)
    if arm == "ar":
        return autoregressive_generate(model, prompt_ids, budget, sampling=plan.sampling, **common)
    if arm == "lookahead":
        return lookahead_generate(model, prompt_ids, plan.lookahead, budget, sampling=plan.sampling, **common)
    if arm == "prompt_lookup":
        return prompt_lookup_generate(
            model,
            prompt_ids,
            budget,
            num_tokens=cfg.prompt_lookup.num_tokens,
            max_ngram_size=cfg.prompt_lookup.max_ngram_size,
            sampling=plan.sampling,
            **common,
        )
    if arm == "jacobi":
        return jacobi_generate(model, prompt_ids, budget, block_size=cfg.jacobi.block_size, **common)
    raise ValueError(f"unknown arm {arm!r}")  # plan_cell already rejected it; a programming error
