"""Dispatch from an arm name to its registered method, with the cell's settings filled in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lade_bench.decoding import DecodeResult
from lade_bench.methods import GenerationRequest, Method, get_method, run_generation
from lade_bench.runner.cell_model import CellModel
from lade_bench.runner.plan import CellPlan


def generate(
    arm: str,
    cell_model: CellModel,
    prompt_ids: Sequence[int],
    plan: CellPlan,
    seed: int,
    max_new_tokens: int | None = None,
    state: Any = None,
) -> DecodeResult:
    """Run one generation of ``arm`` (the engine times the generation itself, nothing else).

    On a multi-device cell, rank 0 first tells the other ranks to run the same generation when the
    arm needs them (``Method.every_rank``: lookahead parallelism, tensor-parallel AR); the others
    call this too, with what rank 0 sent.

    Args:
        arm: a registered method name (``lade_bench.methods``).
        cell_model: the cell's model(s), stop ids and ranks.
        prompt_ids: the rendered prompt.
        plan: supplies N/W/G, sampling and the config sections the method reads.
        seed: the (sample, turn) seed, identical for every arm.
        max_new_tokens: defaults to the cell's; warm-up passes a shorter budget.
        state: the arm's carried state (``runner.method_state``, arms with ``Method.state == "cell"``);
            None: the method builds a fresh one.
    """
    method = get_method(arm)
    budget = max_new_tokens or plan.counts.max_new_tokens
    ranks = cell_model.ranks
    if ranks is None or not method.every_rank:
        return _generate_here(method, cell_model, prompt_ids, plan, seed, budget, state)
    if ranks.is_leader:
        ranks.request(["generate", arm, list(prompt_ids), seed, budget, list(cell_model.stop_ids)])
    ranks.in_step = True
    result = _generate_here(method, cell_model, prompt_ids, plan, seed, budget)
    ranks.in_step = False
    return result


def method_settings(plan: CellPlan, method: Method) -> dict[str, Any]:
    """The config sections ``method`` reads, as its generate function gets them (``CellPlan.settings``).

    A section its entry parses (``Method.parse``) is the parsed value (lookahead's ``LookaheadParams``);
    every other section is the section as composed (read by attribute, e.g.
    ``settings["jacobi"].block_size``).
    """
    return {section: plan.settings[section] for section in method.sections}


def _generate_here(
    method: Method,
    cell_model: CellModel,
    prompt_ids: Sequence[int],
    plan: CellPlan,
    seed: int,
    budget: int,
    state: Any = None,
) -> DecodeResult:
    parallel = cell_model.ranks.lookahead if cell_model.ranks is not None else None
    request = GenerationRequest(
        models=cell_model.models,
        prompt_ids=prompt_ids,
        max_new_tokens=budget,
        stop_ids=list(cell_model.stop_ids),
        seed=seed,
        sampling=plan.sampling if method.supports_sampling else None,
        settings=method_settings(plan, method),
        parallel=parallel,
        # The plan lets only methods with a compiled mode into a compiled cell; None keeps any other eager.
        compiled=cell_model.compiled if method.compiles else None,
        state=state,
    )
    return run_generation(method, request)
