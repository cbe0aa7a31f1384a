"""Dispatch from an arm name to the decoding engine, with the cell's settings filled in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lade_bench.decoding import (
    DecodeResult,
    autoregressive_generate,
    jacobi_generate,
    lookahead_generate,
    prompt_lookup_generate,
)
from lade_bench.runner.plan import CellPlan
from lade_bench.runner.ranks import PARALLEL_ARMS

if TYPE_CHECKING:
    from lade_bench.runner.execute import CellModel


def generate(
    arm: str,
    cell_model: CellModel,
    prompt_ids: Sequence[int],
    plan: CellPlan,
    seed: int,
    max_new_tokens: int | None = None,
) -> DecodeResult:
    """Run one generation of ``arm`` (the engine times the generation itself, nothing else).

    On a multi-device cell, rank 0 first tells the other ranks to run the same generation when the
    arm needs them (lookahead parallelism, tensor-parallel AR); the others call this too, with what
    rank 0 sent.

    Args:
        arm: "ar", "lookahead", "prompt_lookup", "jacobi" or "ar_tp".
        cell_model: the cell's model(s), stop ids and ranks.
        prompt_ids: the rendered prompt.
        plan: supplies N/W/G, sampling and the optional arms' settings.
        seed: the (sample, turn) seed, identical for every arm.
        max_new_tokens: defaults to the config's; warm-up passes a shorter budget.
    """
    budget = max_new_tokens or plan.cfg.max_new_tokens
    ranks = cell_model.ranks
    if ranks is None or arm not in PARALLEL_ARMS:
        return _generate_here(arm, cell_model, prompt_ids, plan, seed, budget)
    if ranks.is_leader:
        ranks.request(["generate", arm, list(prompt_ids), seed, budget, list(cell_model.stop_ids)])
    ranks.in_step = True
    result = _generate_here(arm, cell_model, prompt_ids, plan, seed, budget)
    ranks.in_step = False
    return result


def _generate_here(
    arm: str, cell_model: CellModel, prompt_ids: Sequence[int], plan: CellPlan, seed: int, budget: int
) -> DecodeResult:
    cfg = plan.cfg
    model = cell_model.model
    common = dict(eos_token_id=list(cell_model.stop_ids), seed=seed)
    if arm == "ar":
        return autoregressive_generate(model, prompt_ids, budget, sampling=plan.sampling, **common)
    if arm == "ar_tp":
        return autoregressive_generate(cell_model.tp_model, prompt_ids, budget, sampling=plan.sampling, **common)
    if arm == "lookahead":
        parallel = cell_model.ranks.lookahead if cell_model.ranks is not None else None
        return lookahead_generate(
            model, prompt_ids, plan.lookahead, budget, sampling=plan.sampling, parallel=parallel, **common
        )
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
