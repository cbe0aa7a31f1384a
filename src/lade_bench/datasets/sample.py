"""The one record type every loader produces."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The four kinds of task decide which metrics apply (metrics/ dispatches on this string).
TASKS = ("chat", "code", "summarization", "math")


@dataclass(frozen=True)
class Sample:
    """One benchmark item, already phrased as user turns.

    Attributes:
        sample_id: stable id within the dataset (the upstream id where there is one, else the row
            index in the split), used as an identity column in result rows.
        turns: the user message of each turn, instruction included. Length 1 for every dataset but
            MT-Bench (2).
        reference: the gold output a metric compares against (summary, final number, canonical
            solution); None where scoring does not use one (MT-Bench is judged; its per-turn
            judge references are in ``payload["references"]``).
        task: one of ``TASKS``: "chat", "code", "summarization" or "math".
        payload: what a metric needs beyond ``reference`` (HumanEval problem dict, MBPP asserts,
            ClassEval unit tests, GSM8K gold number, ...). Treat it as read-only; it stays a plain
            dict so samples pickle into sandbox worker processes.
        completion_prefix: for code tasks, the raw code a base/code model continues (HumanEval's
            ``prompt``, ClassEval's skeleton); "" for other tasks, whose completion-mode prompt is
            the user turn itself.
    """

    sample_id: str
    turns: tuple[str, ...]
    reference: str | None
    task: str
    payload: dict[str, Any] = field(default_factory=dict)
    completion_prefix: str = ""

    def __post_init__(self) -> None:
        # Loaders build turns from lists; a tuple keeps the frozen sample really immutable.
        object.__setattr__(self, "turns", tuple(self.turns))
        if not self.turns or not all(isinstance(t, str) and t.strip() for t in self.turns):
            raise ValueError(f"sample {self.sample_id!r}: turns must be non-blank strings, got {self.turns!r}")
        if self.task not in TASKS:
            raise ValueError(f"sample {self.sample_id!r}: task {self.task!r} is not one of {TASKS}")
