"""Prompt lookup decoding as a drafter on the draft-tree seam: transformers' candidate rule, our verification.

Prompt lookup (Saxena, 2023, github.com/apoorvumang/prompt-lookup-decoding) copies the tokens that
followed an earlier occurrence of the sequence's last n-gram. :func:`prompt_lookup_candidate` is
transformers' ``PromptLookupCandidateGenerator.get_candidates`` (transformers 5.x,
``generation/candidate_generator.py``) rule for rule, so a step proposes exactly the candidate
``generate(prompt_lookup_num_tokens=...)`` tries and greedy decoding takes the same number of
forwards; :class:`PromptLookupDrafter` proposes it as a chain for :func:`draft_tree.draft_tree_generate`
(eager) and the compiled loop alike.

:func:`prompt_lookup_generate` is the method; in the compiled mode it runs the same rule on a
static-shape step (:func:`static_prompt_lookup_generate`): transformers' prompt lookup runs inside
assisted generation, which cannot use a static cache (its candidate lengths change every step), so the
compiled mode runs the same method on the static-shape executor (``core/static_step.py``): each step
feeds cur and one candidate, padded to ``num_tokens + 1`` inputs, and keeps the longest prefix the
model agrees with. Greedy verification is the draft-tree primitive's (``verify.verify_greedy`` runs
``tree.verify_tree_greedy`` on the chain), and sampling verifies with the lookahead arm's rule, which
keeps the target distribution.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lade_bench.decoding.core.params import (
    PROMPT_LOOKUP_MAX_NGRAM,
    PROMPT_LOOKUP_NUM_TOKENS,
    DecodeResult,
    SamplingParams,
    require_int,
)

if TYPE_CHECKING:
    import torch

    from lade_bench.decoding.core.compiled import CompiledForwards
    from lade_bench.decoding.core.position_limits import ForwardReach
    from lade_bench.decoding.core.static_step import StaticShapeExecutor
    from lade_bench.decoding.drafters.draft_tree import DraftTree, TreeStep


@dataclass(frozen=True)
class PromptLookupSettings:
    """Prompt lookup's settings (the config section ``prompt_lookup``), checked on construction; their
    defaults are transformers' (``decoding.core.params``, which says why).

    Attributes:
        num_tokens: tokens copied from the sequence as candidates per step (>= 1).
        max_ngram_size: longest n-gram matched against the sequence (>= 1).
    """

    num_tokens: int = PROMPT_LOOKUP_NUM_TOKENS
    max_ngram_size: int = PROMPT_LOOKUP_MAX_NGRAM

    def __post_init__(self) -> None:
        require_int("prompt_lookup.num_tokens", self.num_tokens, minimum=1)
        require_int("prompt_lookup.max_ngram_size", self.max_ngram_size, minimum=1)


def prompt_lookup_reach(settings: PromptLookupSettings) -> ForwardReach:
    """How far a step reaches: ``num_tokens`` candidates past cur, a chain fed in order."""
    from lade_bench.decoding.core import position_limits

    return position_limits.prompt_lookup_reach(settings.num_tokens)


def prompt_lookup_candidate(
    sequence: Sequence[int], num_tokens: int, max_ngram_size: int, stop_ids: frozenset[int], max_length: int
) -> list[int]:
    """The tokens transformers' prompt lookup proposes after ``sequence`` (empty: none).

    The longest suffix n-gram (``max_ngram_size`` down to 1) that occurs earlier in the sequence, at
    its first occurrence, proposes the up to ``num_tokens`` tokens that followed it, cut before the
    first stop id; none when the sequence is one short of ``max_length``.
    """
    length = len(sequence)
    if length + 1 >= max_length:
        return []
    for size in range(min(max_ngram_size, length - 1), 0, -1):
        suffix = list(sequence[-size:])
        for start in range(length - size + 1):
            if list(sequence[start : start + size]) != suffix:
                continue
            begin = start + size
            end = min(begin + num_tokens, length, max_length)
            if begin >= end:
                continue
            chosen = list(sequence[begin:end])
            for index, token in enumerate(chosen):
                if token in stop_ids:
                    chosen = chosen[:index]
                    break
            return chosen
    return []


class PromptLookupDrafter:
    """Proposes :func:`prompt_lookup_candidate` as a chain rooted at cur (a ``draft_tree.Drafter``); stateless."""

    def __init__(self, num_tokens: int, max_ngram_size: int, stop_ids: frozenset[int], max_length: int) -> None:
        """The rule's settings; ``max_length`` = prompt length + max_new_tokens (transformers' ``max_length``)."""
        self.num_tokens = num_tokens
        self.max_ngram_size = max_ngram_size
        self.stop_ids = stop_ids
        self.max_length = max_length

    def propose(self, context: Sequence[int]) -> DraftTree:
        """cur followed by the copied candidate (cur alone when there is none)."""
        from lade_bench.decoding.drafters.draft_tree import DraftTree

        chain = prompt_lookup_candidate(context, self.num_tokens, self.max_ngram_size, self.stop_ids, self.max_length)
        return DraftTree.from_chain(context[-1], chain)

    def observe(self, step: TreeStep) -> None:
        """Nothing to learn: the candidate depends on the sequence alone."""


def prompt_lookup_generate(
    model: torch.nn.Module,
    input_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    settings: PromptLookupSettings | None = None,
    *,
    sampling: SamplingParams | None = None,
    eos_token_id: int | Iterable[int] | None = None,
    seed: int = 0,
    compiled: CompiledForwards | None = None,
) -> DecodeResult:
    """Prompt lookup decoding, transformers' ``prompt_lookup_num_tokens`` (a baseline of the paper).

    Each step verifies transformers' candidate (``prompt_lookup.PromptLookupDrafter``: the same
    candidates, so the same forwards as ``generate(prompt_lookup_num_tokens=...)``) on the draft-tree
    seam: eager, :func:`draft_tree.draft_tree_generate` with the candidate as a chain under the
    model's own causal mask; compiled, the static-shape step (:func:`static_prompt_lookup_generate` below). Sampling
    keeps the target distribution (``draft_tree.verify_tree_sampling`` eager, the lookahead arm's
    rule compiled).

    Args:
        settings: :class:`PromptLookupSettings` (None: the defaults).
        compiled: the compiled mode: the candidate rule on a static-shape compiled step
            (transformers' assisted generation cannot run on a static cache); None: eager.
    """
    import torch

    from lade_bench.decoding.core.checks import eos_set, prompt_ids_as_list
    from lade_bench.decoding.core.compiled import check_static_shape_support
    from lade_bench.decoding.core.params import validate_max_new_tokens
    from lade_bench.decoding.core.position_limits import check_position_limits
    from lade_bench.decoding.drafters.draft_tree import draft_tree_generate
    from lade_bench.decoding.model_checks.support import check_model_support

    settings = settings or PromptLookupSettings()
    num_tokens, max_ngram_size = settings.num_tokens, settings.max_ngram_size
    validate_max_new_tokens(max_new_tokens)
    prompt = prompt_ids_as_list(input_ids)
    stop_ids = eos_set(eos_token_id)
    # Its candidates reach past the sequence like lookahead's window; chains fed in order.
    reach = prompt_lookup_reach(settings)
    if compiled is None:
        drafter = PromptLookupDrafter(num_tokens, max_ngram_size, stop_ids, len(prompt) + max_new_tokens)
        return draft_tree_generate(
            model,
            prompt,
            drafter,
            max_new_tokens,
            eos_token_id=stop_ids,
            seed=seed,
            method="prompt_lookup",
            sampling=sampling,
            reach=reach,
        )
    check_position_limits(model, len(prompt), max_new_tokens, reach)
    check_static_shape_support(model)
    # Last: after every refusal that needs no forward, since the model probe runs a few. The compiled
    # mode feeds each step under the static executor's custom mask.
    check_model_support(model, custom_mask=True)
    with torch.no_grad():
        return static_prompt_lookup_generate(
            model,
            prompt,
            max_new_tokens,
            compiled,
            num_tokens=num_tokens,
            max_ngram_size=max_ngram_size,
            sampling=sampling or SamplingParams(),
            stop_ids=stop_ids,
            seed=seed,
        )


def static_prompt_lookup_generate(
    model: torch.nn.Module,
    prompt: list[int],
    max_new_tokens: int,
    compiled: CompiledForwards,
    *,
    num_tokens: int,
    max_ngram_size: int,
    sampling: SamplingParams,
    stop_ids: frozenset[int],
    seed: int,
) -> DecodeResult:
    """Prompt lookup on the compiled static-shape step; its compile untimed (``CompiledForwards.run``).

    ``prompt_lookup_generate`` (the only caller) has run the static-shape and model checks.
    """
    from lade_bench.decoding.core.static_step import StaticShapeExecutor, StepShape
    from lade_bench.decoding.core.timing import model_device

    shape = StepShape(tokens=num_tokens + 1, logit_rows=num_tokens + 1)
    cache_length = compiled.cache_length(len(prompt) + max_new_tokens + shape.tokens)
    device = model_device(model)

    def generation() -> DecodeResult:
        executor = StaticShapeExecutor(model, "flat", sampling.do_sample, compiled, shape, cache_length)
        return _PromptLookupLoop(
            executor, prompt, max_new_tokens, num_tokens, max_ngram_size, sampling, stop_ids, seed
        ).run(device)

    return compiled.run((id(model), "static_step", shape, cache_length), device, generation)


class _PromptLookupLoop:
    """State of one generation: the candidate rule's settings, the token choice, the output so far."""

    def __init__(
        self,
        executor: StaticShapeExecutor,
        prompt: list[int],
        max_new_tokens: int,
        num_tokens: int,
        max_ngram_size: int,
        sampling: SamplingParams,
        stop_ids: frozenset[int],
        seed: int,
    ) -> None:
        from lade_bench.decoding.core.emission import Emitted, TokenChoice

        self.executor = executor
        self.prompt = prompt
        self.drafter = PromptLookupDrafter(num_tokens, max_ngram_size, stop_ids, len(prompt) + max_new_tokens)
        self.choice = TokenChoice(sampling, seed)
        self.out = Emitted(prompt, max_new_tokens, stop_ids)

    def run(self, device: torch.device) -> DecodeResult:
        """The whole generation on the static-shape step, timed device-synchronised."""
        from lade_bench.decoding.core.executor import StepInput
        from lade_bench.decoding.core.timing import device_synchronizer

        sync = device_synchronizer(device)
        sync()
        started = time.perf_counter()
        logits = self.executor.prefill(self.prompt, 0)
        finished = self.out.emit([self.choice.first(logits[-1])])
        sequence = self.out.sequence
        while not finished:
            position = len(sequence) - 1
            tree = self.drafter.propose(sequence)
            candidates = [tree.tokens[1:]] if tree.size > 1 else []
            step = self.executor.step(StepInput(position, [self.out.tokens[-1]], 1, 1, candidates))
            accepted, winner, matched = self.choice.verify(step, candidates)
            self.executor.commit(step, position, winner, matched)
            finished = self.out.emit(accepted)
        sync()
        return DecodeResult(
            tokens=self.out.tokens,
            steps=len(self.out.accept_lengths),
            accept_lengths=self.out.accept_lengths,
            wall_time_s=time.perf_counter() - started,
            forward_time_s=self.executor.record.forward_time_s,
            method="prompt_lookup_sampling" if self.choice.samples else "prompt_lookup",
            step_tokens=self.executor.record.step_tokens,
        )
