"""A cell's carried state of the methods that learn across requests (``lade_bench.methods.state``).

One state per (arm, repeat) for every arm whose entry says ``state="cell"``, built when first needed
and carried across the cell's samples in their fixed order (the order ``run_samples`` gets them,
recorded in the manifest as ``method_state.sample_order``). One per repeat, so that every repeat of a
sample sees a state that learnt from the same earlier requests, never from an earlier repeat of the
same sample. ``method_state.mode=cold`` builds a fresh state at every sample's start.

Warm-up generations get no state (a fresh one each: they teach the cell's state nothing), and a
resumed cell replays the generations of its stored rows into the state (untimed), failed generations
included, comparing each replay with its stored row (``runner.replay``), so a row's warmth does not
depend on whether its cell was interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lade_bench.datasets import Sample
from lade_bench.methods import get_method
from lade_bench.methods.state import STATE_SECTION
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


def state_record(plan: CellPlan, samples: Sequence[Sample]) -> dict[str, Any] | None:
    """The manifest's ``method_state``: mode, arms and the sample order their state followed; None
    when no arm of the cell keeps state."""
    arms = stateful_arms(plan.arms)
    if not arms:
        return None
    return {
        "mode": state_mode(plan),
        "arms": list(arms),
        "lifetime": "one state per (arm, repeat), carried across samples in sample_order (cold: fresh per sample)",
        "sample_order": [sample.sample_id for sample in samples],
    }


class CellStates:
    """The states of one cell's stateful arms, one per (arm, repeat)."""

    def __init__(self, plan: CellPlan) -> None:
        """Empty; each state is built by its method's ``new_state`` on first use."""
        self.plan = plan
        self.cold = state_mode(plan) == "cold"
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
