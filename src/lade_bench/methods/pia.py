"""PIA's registry pieces: its section as settings, generate, reach, refusal and per-cell state.

The engine is ``lade_bench.decoding.pia`` (which cites the paper and the authors' code and states the
defaults); the section ``pia`` is its :class:`PiaSettings`. The engine's torch-using parts are imported
inside the functions that run it: the registry is read before torch loads.
"""

from __future__ import annotations

from typing import Any

from lade_bench.decoding.params import DecodingConfigError
from lade_bench.decoding.pia import PiaSettings
from lade_bench.methods.registry import CellFacts, GenerationRequest, Settings
from lade_bench.methods.state import use_state

SECTION = "pia"


def pia_settings(settings: Settings) -> PiaSettings:
    """The ``pia`` section as the engine's checked ``PiaSettings`` (absent: the defaults)."""
    section = GenerationRequest({}, (), 1, settings=settings).section(SECTION)
    return PiaSettings(**section)


def new_pia_trie(settings: Settings) -> Any:
    """An empty per-cell trie shaped by the cell's ``pia`` section."""
    from lade_bench.decoding.pia import new_pia_state

    return new_pia_state(pia_settings(settings))


def generate_pia(request: GenerationRequest) -> Any:
    """PIA (``settings["pia"]``) with the cell's warm trie.

    ``request.state`` is the cell's ``PiaState`` (warm); without one a fresh trie (cold).
    """
    from lade_bench.decoding.pia import pia_generate

    def generate(state: Any) -> Any:
        return pia_generate(
            request.model,
            request.prompt_ids,
            request.max_new_tokens,
            eos_token_id=list(request.stop_ids),
            seed=request.seed,
            sampling=request.sampling,
            state=state,
            **request.section(SECTION),
        )

    return use_state(request.state, lambda: new_pia_trie(request.settings), generate)


def pia_method_reach(settings: Settings) -> Any:
    """How far the cell's draft trees reach: ``branch_length`` deep, ``decoding_length`` nodes."""
    from lade_bench.decoding.pia import pia_reach

    return pia_reach(pia_settings(settings))


def refuse_pia(settings: Settings, cell: CellFacts) -> str | None:
    """Why the cell's ``pia`` section cannot run (a setting out of range, named), or None."""
    try:
        pia_settings(settings)
    except DecodingConfigError as err:
        return str(err)
    return None
