"""The typed parts of a cell plan besides the arms' own settings: what the runner reads of a cell.

``runner.plan.plan_cell`` reads the composed config once, checks each value and builds these; the
rest of the runner reads them from the plan (``plan.counts.repeats``, ``plan.model.name``), never
the composed config again. A method's own settings are not here: they are ``CellPlan.settings``,
and the facts a method's ``refuse`` may need are ``lade_bench.methods.CellFacts``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lade_bench.datasets.prompt_formats import PLAIN, prompt_format


@dataclass(frozen=True)
class RunCounts:
    """How much a cell generates and how it is seeded (each checked by the plan).

    Attributes:
        max_new_tokens: most tokens of one generation (every turn, every arm).
        repeats: timed generations per (sample, turn, arm).
        warmup: untimed generations per arm before the first timed one.
        warmup_new_tokens: tokens of one warm-up generation (at most ``max_new_tokens`` are used).
        seed: the global seed each (sample, turn) derives its seed from.
        margin_tolerance: the logit gap at a greedy mismatch above which the runner calls it an engine
            error (``mismatch.margin_tolerance``).
    """

    max_new_tokens: int
    repeats: int = 1
    warmup: int = 0
    warmup_new_tokens: int = 1
    seed: int = 0
    margin_tolerance: float = 0.0


@dataclass(frozen=True)
class ModelChoice:
    """The cell's model: its config section (what ``models.loading`` reads) and what the runner reads of it.

    Attributes:
        section: the ``model`` section as composed, checked by ``models.loading.model_config_problem``.
        name: its name (rows, the folder name, the device profile key).
        chat: prompts are rendered with the chat template.
        system_prompt: the system prompt of chat prompts (None: the template's own).
        cache_dir: the model cache folder (``model_cache_dir``).
        completion_format: without the chat template, ``cued`` or ``plain`` (``datasets.prompt_formats``).
    """

    section: Any
    name: str
    chat: bool = False
    system_prompt: str | None = None
    cache_dir: str | None = None
    completion_format: str = PLAIN

    @property
    def prompt_format(self) -> str:
        """What every row of the cell records as its ``prompt_format``: chat, cued or plain."""
        return prompt_format(self.chat, self.completion_format)


@dataclass(frozen=True)
class CompileOptions:
    """How a compiled cell compiles (``compile_options``, checked; ``mode`` resolved for the device)."""

    mode: str
    cache_block: int
    backend: str


@dataclass(frozen=True)
class ProfileSettings:
    """The device profile's measurement (``device_profile``): once per sweep and profile key."""

    enabled: bool
    context_tokens: int
    warmup: int
    repeats: int
    kv_lengths: tuple[int, ...] = ()
