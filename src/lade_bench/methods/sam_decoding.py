"""SAM-Decoding's registry pieces: its section as settings, generate, reach, refusal and per-cell state.

The engine is ``lade_bench.decoding.sam_decoding`` (which cites the paper and the authors' code and
states the defaults); the section ``sam_decoding`` is its :class:`SamSettings`. The engine is imported
inside the functions that run it: the registry is read before torch loads.
"""

from __future__ import annotations

from typing import Any

from lade_bench.decoding.params import DecodingConfigError
from lade_bench.decoding.sam_decoding import SamSettings
from lade_bench.methods.registry import CellFacts, GenerationRequest, Settings
from lade_bench.methods.state import use_state

SECTION = "sam_decoding"


def sam_settings(settings: Settings) -> SamSettings:
    """The ``sam_decoding`` section as the engine's checked ``SamSettings`` (absent: the defaults)."""
    section = GenerationRequest({}, (), 1, settings=settings).section(SECTION)
    return SamSettings(**section)


def new_sam_decoding_state(settings: Settings) -> Any:
    """An empty per-cell state: the fallback tree's recycling matrix (the automaton is per request)."""
    from lade_bench.decoding.sam_decoding import new_sam_state

    return new_sam_state(sam_settings(settings))


def generate_sam_decoding(request: GenerationRequest) -> Any:
    """SAM-Decoding (``settings["sam_decoding"]``) with the cell's warm recycling matrix.

    ``request.state`` is the cell's ``RecyclingState`` (warm); without one a fresh matrix (cold).
    """
    from lade_bench.decoding.sam_decoding import sam_decoding_generate

    def generate(state: Any) -> Any:
        return sam_decoding_generate(
            request.model,
            request.prompt_ids,
            request.max_new_tokens,
            eos_token_id=list(request.stop_ids),
            seed=request.seed,
            sampling=request.sampling,
            state=state,
            **request.section(SECTION),
        )

    return use_state(request.state, lambda: new_sam_decoding_state(request.settings), generate)


def sam_decoding_reach(settings: Settings) -> Any:
    """The position reach of the cell's settings: a full chain or the fallback tree, whichever is longer."""
    from lade_bench.decoding.sam_decoding import sam_decoding_reach as engine_reach

    return engine_reach(sam_settings(settings))


def refuse_sam_decoding(settings: Settings, cell: CellFacts) -> str | None:
    """Why the cell's ``sam_decoding`` section cannot run (a setting out of range, a bad tree), or None."""
    try:
        sam_settings(settings)
    except DecodingConfigError as err:
        return str(err)
    return None
