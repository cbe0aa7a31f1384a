"""The warm-state protocol: methods that learn from earlier requests, and how a cell carries their state.

A method's registry entry declares its state's lifetime (``Method.state``):

* ``"none"``: stateless (AR, lookahead, prompt lookup, ...);
* ``"request"``: state lives within one generation and is rebuilt for the next;
* ``"cell"``: state persists across the requests of a cell, the papers' setting for Token Recycling
  (its adjacency matrix) and SuffixDecoding (its global suffix tree). ``Method.new_state(settings)``
  builds an empty one.

The runner builds each ``"cell"`` method's state at the cell's start (one per repeat, so every repeat
sees the same warmth), hands it to every generation in ``GenerationRequest.state``, in the cell's
fixed, recorded sample order (``runner.method_state``), and builds a fresh one per sample when the
config says ``method_state.mode=cold``. A generate function called without a state (``bench``,
``gpu_check``, a direct call) builds a fresh one: cold.

How far a warm state reaches is ``method_state.scope`` (:data:`STATE_SCOPES`): ``cell``, one state per
cell whose warm-up generations get fresh states of their own; or ``benchmark``, Spec-Bench's (its
``evaluation/eval.py`` runs one process over every question in file order, its warm-up generations first
on the same model object, and Token Recycling's matrix, created once in ``inference_recycling.py``, is
never reset): the cell is then the whole benchmark, every group's questions in file order, and its
warm-up runs on the state the timed requests use.

A state object has ``requests_seen`` (requests finished with it before this one) and ``size()``
(entries held); :func:`use_state` records both in the result's ``stats`` at the request's start and
counts the request at its end, so every row says how warm its state was. A ``"cell"`` state that no
request changes (``Method.static_state``: REST's datastore) is carried the same way, but is neither
warm nor cold: :func:`state_text` labels it ``static`` wherever the others show warm or cold.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

# Method.state values.
STATE_LIFETIMES: tuple[str, ...] = ("none", "request", "cell")
# The config section that says whether a cell's state is carried (warm) or rebuilt per sample (cold);
# every "cell" method reads it (Method adds it to its sections), so it enters the id of those cells only.
STATE_SECTION = "method_state"
STATE_MODES: tuple[str, ...] = ("warm", "cold")
# How far a warm state reaches: one cell (its warm-up on fresh states), or the benchmark as Spec-Bench runs it.
STATE_SCOPES: tuple[str, ...] = ("cell", "benchmark")
# The scope of every cell recorded before the setting existed (a recorded config or row without it).
SCOPE_BEFORE = "cell"
# The State label of a carried state that no request changes (Method.static_state).
STATIC_STATE = "static"
# DecodeResult.stats keys the rows' warmth columns are filled from.
REQUESTS_SEEN_STAT = "state_requests_seen"
STATE_SIZE_STAT = "state_size"


class MethodState(Protocol):
    """What the runner and the rows need from a method's persistent state."""

    requests_seen: int

    def size(self) -> int:
        """Entries the state holds (Token Recycling: matrix rows filled; SuffixDecoding: tree nodes)."""
        ...


_State = TypeVar("_State", bound=MethodState)


def use_state(state: _State | None, fresh: Callable[[], _State], generate: Callable[[_State], Any]) -> Any:
    """``generate(state)`` (a fresh state when None: cold), its warmth recorded in the result's stats.

    ``stats[REQUESTS_SEEN_STAT]`` and ``stats[STATE_SIZE_STAT]`` are the state's counters at the
    request's start; ``requests_seen`` then counts this request (also when it failed partway: the
    state may have learnt from its forwards).
    """
    state = fresh() if state is None else state
    seen, size = state.requests_seen, state.size()
    try:
        result = generate(state)
    finally:
        state.requests_seen += 1
    result.stats[REQUESTS_SEEN_STAT] = float(seen)
    result.stats[STATE_SIZE_STAT] = float(size)
    return result


def warmth_span(low: Any, high: Any) -> str:
    """``"0-39"``: the fewest and most earlier requests a state had seen at its rows' starts (warm when
    the most grows with the samples, cold when it stays at the turn count); empty when either is
    missing (a stateless method, rows written before the count existed)."""
    if not all(isinstance(v, numbers.Real) and math.isfinite(v) for v in (low, high)):
        return ""
    return f"{int(low)}-{int(high)}"


def scope_problem(scope: Any, mode: Any, categories: Any, dataset: str, shuffle_seed: Any = None) -> str | None:
    """Why ``method_state.scope`` cannot run as configured (None: it can); asked before anything loads.

    Args:
        scope: ``method_state.scope`` as configured.
        mode: ``method_state.mode`` (warm or cold).
        categories: ``dataset.categories`` (None: every group), as the registry's category selection
            reads it, or None for a dataset without categories.
        dataset: the dataset's name, for the message.
        shuffle_seed: ``dataset.shuffle_seed`` (None: file order).
    """
    if scope not in STATE_SCOPES:
        return f"method_state.scope={scope!r} is not allowed: use one of {', '.join(STATE_SCOPES)}"
    if scope != "benchmark":
        return None
    if mode == "cold":
        return (
            "method_state.scope=benchmark carries one state across the whole benchmark, method_state.mode=cold "
            "gives each sample a fresh one: set method_state.mode=warm, or method_state.scope=cell"
        )
    if categories is not None:
        return (
            f"method_state.scope=benchmark carries one state across every group of {dataset} in file order, so "
            f"its cell takes them all, not dataset.categories={list(categories)}: drop dataset.categories "
            "(dataset.per_category_limit caps each group), or set method_state.scope=cell"
        )
    if shuffle_seed is not None:
        # The state's history is the benchmark's file order (Spec-Bench's eval.py); a draw reorders it.
        return (
            f"method_state.scope=benchmark carries one state across {dataset} in file order, which "
            f"dataset.shuffle_seed={shuffle_seed!r} reorders: set dataset.shuffle_seed=null, or method_state.scope=cell"
        )
    return None


def warmth_words(mode: str, scope: str | None) -> str:
    """``"warm per cell"`` / ``"warm per benchmark"``: a learning state's mode and how far it reaches
    (``mode`` alone where the scope is not known)."""
    return f"{mode} per {scope}" if scope else mode


def state_text(lifetime: str, static: bool, mode: str | None, low: Any, high: Any, scope: str | None = None) -> str:
    """The State column of a method's rows in a cell, the console's and the report's alike.

    Args:
        lifetime: the method's ``Method.state``; only ``"cell"`` carries a state across requests.
        static: ``Method.static_state``: no request changes that state (REST's datastore).
        mode: the cell's ``method_state.mode`` (warm or cold; None: not recorded).
        low: the fewest earlier requests the state had seen at a row's start (``state_requests_min``).
        high: the most (``state_requests_max``).
        scope: the cell's ``method_state.scope`` (cell or benchmark; None: not shown), after the mode.

    Returns:
        ``"warm 0-39"`` / ``"cold 0-1"`` (the mode, then :func:`warmth_span`) for a state that learns,
        ``"warm per benchmark 3-62"`` with its scope; ``"static"`` for a static one; ``""`` for a method
        without carried state, or without the counts.
    """
    if lifetime != "cell":
        return ""
    if static:
        return STATIC_STATE
    span = warmth_span(low, high)
    if not span:
        return ""
    return f"{warmth_words(mode, scope)} {span}" if mode else span
