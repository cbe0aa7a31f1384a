"""A drafter method's registry pieces, built from its engine: one section, one settings class, one state.

Token Recycling, SuffixDecoding, PIA, SAM-Decoding and REST have the same shape: their section is one
engine settings class (which checks itself, raising ``DecodingConfigError``), their engine function
takes that section as keywords beside the request's model, prompt, budget, stop ids, seed, sampling
and the cell's state (``Method.state="cell"``), and their reach and empty state are functions of the
settings. :class:`DrafterMethod` holds those engine pieces and gives the registry's ``generate``,
``new_state``, ``reach`` and ``refuse`` (a method with more refusals calls :meth:`DrafterMethod.checked`
first). The engines' torch-using parts are imported inside their functions: building one imports no
torch, so the registry stays cheap to read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from lade_bench.decoding.core.params import DecodingConfigError
from lade_bench.methods.registry import CellFacts, GenerationRequest, Settings
from lade_bench.methods.state import use_state

_Settings = TypeVar("_Settings")


@dataclass(frozen=True)
class DrafterMethod(Generic[_Settings]):
    """The engine pieces of a method whose section is one settings class and whose state is per cell.

    Attributes:
        section: the config section (the method's name), e.g. ``"pia"``.
        settings: the engine's settings class, built from the section's keys (absent: its defaults);
            it raises ``DecodingConfigError`` naming a bad value.
        engine: ``engine(model, prompt_ids, max_new_tokens, *, eos_token_id, seed, sampling, state,
            **section)``, e.g. ``pia_generate``.
        empty_state: the engine's empty per-cell state for settings, e.g. ``new_pia_state``.
        engine_reach: the deepest and largest draft at settings (``draft_reach``), e.g. ``pia_reach``.
    """

    section: str
    settings: Callable[..., _Settings]
    engine: Callable[..., Any]
    empty_state: Callable[[_Settings], Any]
    engine_reach: Callable[[_Settings], Any]

    def parse(self, settings: Settings) -> _Settings:
        """The cell's section as the engine's checked settings (absent: the defaults)."""
        return self.settings(**GenerationRequest({}, (), 1, settings=settings).section(self.section))

    def checked(self, settings: Settings) -> _Settings | str:
        """The parsed settings, or the message of the ``DecodingConfigError`` that names a bad one."""
        try:
            return self.parse(settings)
        except DecodingConfigError as err:
            return str(err)

    def new_state(self, settings: Settings) -> Any:
        """An empty per-cell state shaped by the cell's section (``Method.new_state``)."""
        return self.empty_state(self.parse(settings))

    def generate(self, request: GenerationRequest) -> Any:
        """The engine on the request with the cell's state (``request.state``: warm; without one a fresh
        state: cold), its warmth recorded (``use_state``)."""
        section = request.section(self.section)
        return use_state(
            request.state,
            lambda: self.new_state(request.settings),
            lambda state: self.engine(
                request.model,
                request.prompt_ids,
                request.max_new_tokens,
                eos_token_id=list(request.stop_ids),
                seed=request.seed,
                sampling=request.sampling,
                state=state,
                **section,
            ),
        )

    def reach(self, settings: Settings) -> Any:
        """How far the cell's drafts reach (``Method.reach``)."""
        return self.engine_reach(self.parse(settings))

    def refuse(self, settings: Settings, cell: CellFacts) -> str | None:
        """Why the cell's section cannot run (a setting out of range, named), or None (``Method.refuse``)."""
        checked = self.checked(settings)
        return checked if isinstance(checked, str) else None
