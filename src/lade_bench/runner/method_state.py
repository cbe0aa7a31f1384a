"""A cell's carried state of the methods that learn across requests (``lade_bench.methods.state``).

One state per (arm, repeat) for every arm whose entry says ``state="cell"``, built when first needed
and carried across the cell's samples in their fixed order (the order ``run_samples`` gets them,
recorded in the manifest as ``method_state.sample_order``). One per repeat, so that every repeat of a
sample sees a state that learnt from the same earlier requests, never from an earlier repeat of the
same sample. ``method_state.mode=cold`` builds a fresh state at every sample's start.

Under ``method_state.scope=cell`` warm-up generations get no state (a fresh one each: they teach the
cell's state nothing). Under ``scope=benchmark`` (Spec-Bench's: ``methods.state``) the cell is the whole
benchmark, its samples every group's in file order, and the warm-up runs first on every (arm, repeat)
state, as Spec-Bench's ``evaluation/eval.py`` runs its warm-up on the model object its questions then
use (``runner.execute.warm_up_states``). A resumed cell replays the generations of its stored rows into
the state (untimed), failed generations included, comparing each replay with its stored row
(``runner.replay``), after the benchmark scope's warm-up, so a row's warmth does not depend on whether
its cell was interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lade_bench.datasets import Sample
from lade_bench.methods import get_method
from lade_bench.methods.state import SCOPE_BEFORE, STATE_SECTION
from lade_bench.runner.arms import method_settings
from lade_bench.runner.plan import CellPlan


def stateful_arms(arms: Sequence[str]) -> tuple[str, ...]:
    """The arms whose state lives across a cell's requests, in the cell's order."""
    return tuple(arm for arm in arms if get_method(arm).state == "cell")


def state_mode(plan: CellPlan) -> str:
    """``warm`` or ``cold`` (``method_state.mode``; an Enum in a structured config, a str in a plain one).

    Only a cell with a stateful arm has the section among its settings (``Method.sections``); any
    other cell has no state to keep, and is ``warm`` by the section's meaning (nothing is reset).
    """
    section = plan.settings.get(STATE_SECTION)
    if section is None:
        return "warm"
    mode = section.mode
    return str(getattr(mode, "value", mode))


def state_scope(plan: CellPlan) -> str:
    """``cell`` or ``benchmark`` (``method_state.scope``); ``cell`` for a cell without a stateful arm (no
    section among its settings) and for a config recorded before the setting existed (no key)."""
    section = plan.settings.get(STATE_SECTION)
    if section is None:
        return SCOPE_BEFORE
    scope = section.get("scope", SCOPE_BEFORE)
    return str(getattr(scope, "value", scope))


def state_record(plan: CellPlan, samples: Sequence[Sample]) -> dict[str, Any] | None:
    """The manifest's ``method_state``: mode, scope, arms, the sample order their state followed and,
    under the benchmark scope, the warm-up the state learnt from first; None when no arm keeps state."""
    arms = stateful_arms(plan.arms)
    if not arms:
        return None
    scope = state_scope(plan)
    record: dict[str, Any] = {"mode": state_mode(plan), "scope": scope, "arms": list(arms)}
    if scope == "benchmark":
        counts = plan.counts
        record["lifetime"] = (
            "one state per (arm, repeat) for the whole benchmark: the warm-up first, then every sample in sample_order"
        )
        record["warmup"] = {
            "sample": samples[0].sample_id if samples else None,
            "rounds": counts.warmup,
            "turns": len(samples[0].turns) if samples else 0,
            "max_new_tokens": min(counts.warmup_new_tokens, counts.max_new_tokens),
        }
    else:
        record["lifetime"] = (
            "one state per (arm, repeat), carried across samples in sample_order (cold: fresh per sample); "
            "the warm-up on fresh states"
        )
    record["sample_order"] = [sample.sample_id for sample in samples]
    return record


class CellStates:
    """The states of one cell's stateful arms, one per (arm, repeat)."""

    def __init__(self, plan: CellPlan) -> None:
        """Empty; each state is built by its method's ``new_state`` on first use."""
        self.plan = plan
        self.cold = state_mode(plan) == "cold"
        self.scope = state_scope(plan)
        self.arms = frozenset(stateful_arms(plan.arms))
        self._states: dict[tuple[str, int], Any] = {}

    def start_sample(self) -> None:
        """Called before each sample's first generation: a cold cell forgets every state."""
        if self.cold:
            self._states.clear()

    def get(self, arm: str, repeat: int) -> Any:
        """The state ``arm`` generates with in ``repeat`` (None for a stateless arm)."""
        if arm not in self.arms:
            return None
        key = (arm, repeat)
        if key not in self._states:
            method = get_method(arm)
            assert method.new_state is not None  # Method refuses state="cell" without it
            self._states[key] = method.new_state(method_settings(self.plan, method))
        return self._states[key]
