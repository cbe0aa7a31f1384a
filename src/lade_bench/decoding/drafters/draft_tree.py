"""The draft-tree seam: one verification primitive for every drafting method.

A drafter proposes a tree of candidate tokens rooted at ``cur`` (the newest emitted token, not yet
in the KV cache); one forward feeds the whole tree on top of the committed cache, each node at
position ``p + depth`` (``p`` = cur's position) under a 4D mask in which a node sees the cache, its
ancestors and itself; the accepted path is the longest root-to-node path whose every token equals
the argmax at its parent (:func:`verify_tree_greedy`); the cache then keeps the entries of cur and
of that path only. A chain draft (prompt lookup, a draft model) is a tree with one branch; a
lookahead verification branch is a tree whose root is cur (flat: one chain per candidate; trie:
shared prefixes merged). This is the split transformers makes between its candidate generators and
verification, with trees instead of chains (SpecInfer, Miao et al., ASPLOS 2024, arXiv 2305.09781,
section 4: token tree verification).

A method is then a :class:`Drafter` (``propose`` a tree from the context, ``observe`` each step)
run by :func:`draft_tree_generate`.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch

from lade_bench.decoding.core.checks import (
    UnsupportedModelError,
    attention_implementation_of,
    eos_set,
    layer_attention_of,
    prompt_ids_as_list,
)
from lade_bench.decoding.core.emission import Emitted, TokenChoice
from lade_bench.decoding.core.forward import CachedForward
from lade_bench.decoding.core.kv_cache import commit_accepted
from lade_bench.decoding.core.layout import StepLayout, build_branch_layout
from lade_bench.decoding.core.masks import StepMasks
from lade_bench.decoding.core.params import DecodeResult, DecodingConfigError, SamplingParams, validate_max_new_tokens
from lade_bench.decoding.core.position_limits import ForwardReach, check_position_limits, position_thresholds
from lade_bench.decoding.core.sampling import warped_probabilities
from lade_bench.decoding.core.timing import device_synchronizer, model_dtype
from lade_bench.decoding.core.tree import (
    DraftTree,
    tree_of_candidates,
    verify_tree_greedy,
    verify_tree_sampling,
)
from lade_bench.decoding.model_checks.support import check_model_support

_Settings = TypeVar("_Settings")
_State = TypeVar("_State", bound="DrafterState")

# Re-exported: the seam's names live here (DraftTree and verification are model-free, in ``tree.py``).
__all__ = [
    "DraftTree",
    "Drafter",
    "DrafterRun",
    "TreeLayouts",
    "TreeStep",
    "draft_reach",
    "draft_tree_generate",
    "run_drafter",
    "tree_layout",
    "tree_of_candidates",
    "verify_tree_greedy",
    "verify_tree_sampling",
]


@dataclass(frozen=True)
class TreeStep:
    """What one verification forward produced, given to the drafter's ``observe``.

    Attributes:
        tree: the tree fed.
        position: cur's position p.
        logits: (len(tree.tokens), V) logits, rows aligned with the tree's nodes (the model's dtype).
        accepted: the tokens verification accepted (the path's tokens + the token after its end),
            before the output cuts them at a stop id or the budget.
        path: tree node indices of the accepted path, root excluded (``len(accepted) - 1`` of them).
        last: this step's emission ends the generation (a stop id or the budget): Token Recycling's
            authors recycle nothing from their loop's final forward.
    """

    tree: DraftTree
    position: int
    logits: torch.Tensor
    accepted: list[int]
    path: list[int]
    last: bool = False


class Drafter(Protocol):
    """A drafting method behind the seam: proposes a tree per step and learns from each step."""

    def propose(self, context: Sequence[int]) -> DraftTree:
        """A tree rooted at ``context[-1]`` (cur); ``context`` = prompt + every emitted token so far.

        ``context`` is the generation's own list: read it, never modify it.
        """
        ...

    def observe(self, step: TreeStep) -> None:
        """Learn from the step (Token Recycling reads ``step.logits``; SuffixDecoding the accepted tokens)."""
        ...


def tree_layout(tree: DraftTree, dtype: torch.dtype, device: torch.device | str) -> StepLayout:
    """The step layout of feeding ``tree`` alone: node i is input i, at offset depth(i), sees its ancestors.

    Lookahead's layout with a window of cur alone (one level, one column) and ``tree`` as its
    branch: one construction of the tree mask for every method. Every row's logits are read.
    """
    return build_branch_layout(1, 1, tree.parents, (), dtype, device)


class TreeLayouts:
    """Each tree shape's layout, built once; the least recently used beyond ``capacity`` dropped."""

    def __init__(self, dtype: torch.dtype, device: torch.device | str, capacity: int = 256) -> None:
        """Layouts with masks in ``dtype`` on ``device``."""
        self._dtype = dtype
        self._device = device
        self._capacity = capacity
        self._layouts: OrderedDict[tuple[int, ...], StepLayout] = OrderedDict()

    def get(self, tree: DraftTree) -> StepLayout:
        """The layout of ``tree``'s shape (its parents)."""
        layout = self._layouts.get(tree.parents)
        if layout is None:
            layout = self._layouts[tree.parents] = tree_layout(tree, self._dtype, self._device)
            if len(self._layouts) > self._capacity:
                self._layouts.popitem(last=False)
        else:
            self._layouts.move_to_end(tree.parents)
        return layout


def draft_reach(method: str, depth: int, size: int, chains_only: bool = False) -> ForwardReach:
    """How far a drafter's forwards reach: trees at most ``depth`` deep and ``size`` nodes (cur included).

    ``chains_only``: every tree is a chain, fed in order (a plain causal block, like plain decoding).
    """
    return ForwardReach(method, depth, size, chains_only, "a shallower or smaller draft tree")


@torch.no_grad()
def draft_tree_generate(
    model: torch.nn.Module,
    input_ids: Sequence[int] | torch.Tensor,
    drafter: Drafter,
    max_new_tokens: int,
    *,
    eos_token_id: int | Iterable[int] | None = None,
    seed: int = 0,
    method: str = "draft_tree",
    prefill_observer: Callable[[torch.Tensor], None] | None = None,
    sampling: SamplingParams | None = None,
    reach: ForwardReach | None = None,
    hold_last_prompt_token: bool = False,
) -> DecodeResult:
    """Generation whose every decode step is one tree-verification forward on the KV cache.

    Prefill (one forward; the first token is its last row's argmax, or a draw), then per step: the
    drafter proposes a tree rooted at cur; one forward feeds the tree's tokens with the tree mask
    and position ids p + depth; verification (:func:`verify_tree_greedy`, or with
    ``sampling.do_sample`` :func:`verify_tree_sampling`) picks the accepted path; the cache keeps
    cur's and that path's entries only; ``drafter.observe`` sees the step; the tokens are emitted
    (cut at a stop id and the budget). Greedy output is exactly autoregressive greedy decoding's.

    Args:
        model: a decoder-only transformers model (batch size 1) that lookahead supports.
        input_ids: the prompt, a list of ids or a 1 x L / L tensor.
        drafter: proposes each step's tree and observes each step.
        max_new_tokens: most tokens to generate (>= 1).
        eos_token_id: stop after emitting any of these ids (included in the output).
        seed: seeds every sampling draw.
        method: the name in ``DecodeResult.method`` (``_sampling`` appended when sampling) and messages.
        prefill_observer: called with the prompt's (L, V) logits (every row) after the prefill.
        sampling: greedy when None or ``do_sample=False``.
        reach: the deepest and largest tree the drafter proposes (:func:`draft_reach`); a tree beyond
            it raises DecodingConfigError. ``reach.in_order`` (chains only) feeds each chain as a
            plain causal block with the model's own mask, so any attention implementation runs it.
            None: the drafter declares no reach, allowed only on models without position-dependent
            features (``position_limits.py``).
        hold_last_prompt_token: the prefill feeds the prompt but its last token and emits nothing; the
            first decode step's tree is rooted at the prompt's last token (Token Recycling's authors'
            loop, Spec-Bench ``evaluation/inference_recycling.py``), so that step emits the first token
            and whatever of its draft is accepted. A one-token prompt has nothing to hold back from: it
            is prefilled whole. False: the prefill feeds the whole prompt and emits the first token.

    Returns:
        DecodeResult; ``steps`` counts every forward (prefill included); stats ``decode_step_tokens``
        (input tokens of the decode steps). Tokens emitted and fed per decode step come from
        ``accept_lengths`` and ``step_tokens``, as for every method (``runner.rows.decode_step_means``).
    """
    sampling = sampling or SamplingParams()
    validate_max_new_tokens(max_new_tokens)
    prompt = prompt_ids_as_list(input_ids)
    if reach is None:
        if position_thresholds(model):
            raise UnsupportedModelError(
                f"{type(model).__name__} has position-dependent features ({position_thresholds(model)[0].feature}) "
                f"and {method} declares no reach: pass draft_tree_generate(reach=draft_reach(...)) so the "
                "generation can be checked before its first forward"
            )
    else:
        check_position_limits(model, len(prompt), max_new_tokens, reach)
    chains_only = reach is not None and reach.in_order
    # Last: after every refusal that needs no forward, since the model probe runs a few.
    check_model_support(model, custom_mask=not chains_only)
    loop = _TreeLoop(model, prompt, drafter, max_new_tokens, sampling, eos_set(eos_token_id), seed, reach)
    return loop.run(method, prefill_observer, hold_last_prompt_token and len(prompt) > 1)


@dataclass(frozen=True)
class TreeRequest:
    """One generation's inputs as every drafter engine (PIA, SuffixDecoding, Token Recycling, ...) takes
    them, run with that engine's drafter by :meth:`run`.

    Attributes:
        model: the target model.
        prompt: the prompt's ids as a list (``prompt_ids_as_list``; drafters index it).
        max_new_tokens: most tokens to generate.
        eos_token_id: id(s) that end the generation (emitted, then stop).
        seed: seeds every sampling draw.
        sampling: a ``SamplingParams``; None or ``do_sample=False``: greedy.
    """

    model: torch.nn.Module
    prompt: list[int]
    max_new_tokens: int
    eos_token_id: int | Iterable[int] | None = None
    seed: int = 0
    sampling: SamplingParams | None = None

    def run(
        self,
        drafter: Drafter,
        method: str,
        reach: ForwardReach,
        *,
        prefill_observer: Callable[[torch.Tensor], None] | None = None,
        close: Callable[[list[int]], None] | None = None,
        hold_last_prompt_token: bool = False,
    ) -> DecodeResult:
        """:func:`draft_tree_generate` with ``drafter``, then ``close(prompt + emitted)``.

        ``close`` ends the request on a drafter whose state serves the cell's next one; it runs also
        when the generation failed (with the prompt alone), so a failed request never leaves the state
        half-open.
        """
        emitted: list[int] = []
        try:
            result = draft_tree_generate(
                self.model,
                self.prompt,
                drafter,
                self.max_new_tokens,
                eos_token_id=self.eos_token_id,
                seed=self.seed,
                method=method,
                prefill_observer=prefill_observer,
                sampling=self.sampling,
                reach=reach,
                hold_last_prompt_token=hold_last_prompt_token,
            )
            emitted = result.tokens
        finally:
            if close is not None:
                close(self.prompt + emitted)
        return result


@dataclass(frozen=True)
class DrafterRun:
    """One request's drafter and the hooks :func:`run_drafter` runs around it.

    Attributes:
        drafter: proposes each step's tree and observes each step.
        prefill_observer: called with the prompt's logits after the prefill (every row); None: not read.
        close: ends the request on the cell's state (``TreeRequest.run``'s ``close``); None: nothing to end.
        stats: the drafter's own counters for ``DecodeResult.stats``, read after the generation; None: none.
        hold_last_prompt_token: :func:`draft_tree_generate`'s (the prefill leaves the prompt's last token
            to the first decode step).
    """

    drafter: Drafter
    prefill_observer: Callable[[torch.Tensor], None] | None = None
    close: Callable[[list[int]], None] | None = None
    stats: Callable[[], dict[str, float]] | None = None
    hold_last_prompt_token: bool = False


class DrafterState(Protocol):
    """What :func:`run_drafter` needs of a drafter's per-cell state: a check against the request."""

    def check(self, settings: Any, model: Any) -> None:
        """Raise DecodingConfigError when this state cannot serve ``settings`` on ``model``."""
        ...


def run_drafter(
    model: torch.nn.Module,
    input_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    settings: _Settings,
    state: _State | None,
    *,
    method: str,
    new_state: Callable[[_Settings], _State],
    start: Callable[[_State, list[int]], DrafterRun],
    reach: ForwardReach,
    eos_token_id: int | Iterable[int] | None = None,
    seed: int = 0,
    sampling: SamplingParams | None = None,
) -> DecodeResult:
    """The generation every drafter engine with a per-cell state ends with.

    A fresh state when none is given (cold), the state checked against the settings and the model, the
    request's drafter built on it (``start(state, prompt)``), :meth:`TreeRequest.run` with its prefill
    observer and ``close``, and its own counters added to the result's stats.

    Args:
        model, input_ids, max_new_tokens, eos_token_id, seed, sampling: as :func:`draft_tree_generate`.
        settings: the engine's checked settings.
        state: the cell's state (warm); None: ``new_state(settings)`` (cold).
        method: the name in ``DecodeResult.method`` and in messages.
        new_state: settings -> an empty state.
        start: (state, prompt ids) -> the request's :class:`DrafterRun`.
        reach: the deepest and largest tree the drafter proposes.

    Raises:
        DecodingConfigError: the state cannot serve the settings or the model (its ``check``).
    """
    state = new_state(settings) if state is None else state
    state.check(settings, model)
    request = TreeRequest(model, prompt_ids_as_list(input_ids), max_new_tokens, eos_token_id, seed, sampling)
    run = start(state, request.prompt)
    result = request.run(
        run.drafter,
        method,
        reach,
        prefill_observer=run.prefill_observer,
        close=run.close,
        hold_last_prompt_token=run.hold_last_prompt_token,
    )
    if run.stats is not None:
        result.stats.update(run.stats())
    return result


class _TreeLoop:
    """State of one draft-tree generation (one object per call, nothing at module scope)."""

    def __init__(
        self,
        model: torch.nn.Module,
        prompt: list[int],
        drafter: Drafter,
        max_new_tokens: int,
        sampling: SamplingParams,
        stop_ids: frozenset[int],
        seed: int,
        reach: ForwardReach | None,
    ) -> None:
        self.forward = CachedForward(model)
        device = self.forward.device
        self.masks = StepMasks(layer_attention_of(model), device, attention_implementation_of(model))
        self.layouts = TreeLayouts(model_dtype(model), device)
        self.prompt = prompt
        self.drafter = drafter
        self.choice = TokenChoice(sampling, seed)
        self.out = Emitted(prompt, max_new_tokens, stop_ids)
        self.reach = reach

    def run(
        self, method: str, prefill_observer: Callable[[torch.Tensor], None] | None, hold_last: bool
    ) -> DecodeResult:
        sync = device_synchronizer(self.forward.device)
        sync()
        started = time.perf_counter()
        # Held back, the prompt's last token is cur of the first decode step (not yet in the cache).
        prefilled = self.prompt[:-1] if hold_last else self.prompt
        if prefill_observer is None:
            logits = self.forward.prefill(prefilled, 0)
        else:
            logits = self.forward(prefilled)  # every row, for the observer
            prefill_observer(logits)
        # A prefill that holds back the last token emits nothing (a 0 in accept_lengths, steps unchanged).
        finished = self.out.emit([] if hold_last else [self.choice.first(logits[-1])])
        while not finished:
            finished = self._step()
        sync()
        wall = time.perf_counter() - started
        decode_inputs = self.forward.record.step_tokens[1:]
        return DecodeResult(
            tokens=self.out.tokens,
            steps=len(self.out.accept_lengths),
            accept_lengths=self.out.accept_lengths,
            wall_time_s=wall,
            forward_time_s=self.forward.record.forward_time_s,
            method=f"{method}_sampling" if self.choice.samples else method,
            stats={
                "decode_step_tokens": float(sum(decode_inputs)),
            },
            step_tokens=self.forward.record.step_tokens,
        )

    def _step(self) -> bool:
        """One proposal, forward, verification, cache commit, observation and emission; True when done."""
        sequence = self.out.sequence
        position = len(sequence) - 1
        tree = self.drafter.propose(sequence)
        self._check(tree, sequence[-1])
        if self.reach is not None and self.reach.in_order:
            # A chain in order is a plain causal block: the model's own mask, the positions after the cache.
            logits = self.forward(list(tree.tokens))
        else:
            layout = self.layouts.get(tree)
            logits = self.forward(
                list(tree.tokens),
                attention_mask=self.masks.build(layout, position),
                position_ids=(layout.position_offsets + position)[None, :],
            )
        if self.choice.samples:
            warpers = self.choice.warpers
            assert warpers is not None
            accepted, path = verify_tree_sampling(
                lambda node: warped_probabilities(logits[node], warpers), tree, self.choice.generator
            )
        else:
            accepted, path = verify_tree_greedy(logits.argmax(dim=-1).tolist(), tree)
        commit_accepted(self.forward.cache, position, tree.size, path)
        last = self.out.finishes(accepted)
        self.drafter.observe(TreeStep(tree, position, logits, accepted, path, last))
        return self.out.emit(accepted)

    def _check(self, tree: DraftTree, cur: int) -> None:
        if tree.tokens[0] != cur:
            raise DecodingConfigError(
                f"a draft tree must be rooted at cur={cur}; the drafter's root is {tree.tokens[0]}"
            )
        reach = self.reach
        if reach is None:
            return
        if tree.depth > reach.positions or tree.size > reach.inputs:
            raise DecodingConfigError(
                f"{reach.method} proposed a tree of depth {tree.depth} and {tree.size} nodes; its declared reach "
                f"allows depth <= {reach.positions} and <= {reach.inputs} nodes"
            )
        if reach.in_order and not tree.is_chain():
            raise DecodingConfigError(
                f"{reach.method} declared chains only but proposed a tree with parents {tree.parents}"
            )
