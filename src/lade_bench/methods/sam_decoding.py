"""SAM-Decoding's registry pieces: its section as settings, generate, reach, refusal, per-cell state and id.

The engine is ``lade_bench.decoding.sam_decoding`` (which cites the paper and the authors' code and
states the defaults); the section ``sam_decoding`` is its :class:`SamSettings`. Its optional static
corpus is a REST datastore (``lade_bench.rest_datastore``): refused, and named in the cell id, by
REST's own code. The engine is imported inside the functions that run it: the registry is read
before torch loads.
"""

from __future__ import annotations

from typing import Any

from lade_bench.decoding.params import DecodingConfigError
from lade_bench.decoding.sam_decoding import STATIC_SETTING, SamSettings
from lade_bench.methods.registry import CellFacts, GenerationRequest, Settings
from lade_bench.methods.state import use_state

SECTION = "sam_decoding"


def sam_settings(settings: Settings) -> SamSettings:
    """The ``sam_decoding`` section as the engine's checked ``SamSettings`` (absent: the defaults)."""
    section = GenerationRequest({}, (), 1, settings=settings).section(SECTION)
    return SamSettings(**section)


def new_sam_decoding_state(settings: Settings) -> Any:
    """An empty per-cell state: the fallback tree's recycling matrix and the static corpus, loaded once
    (the automaton is per request)."""
    from lade_bench.decoding.sam_decoding import new_sam_state

    return new_sam_state(sam_settings(settings))


def generate_sam_decoding(request: GenerationRequest) -> Any:
    """SAM-Decoding (``settings["sam_decoding"]``) with the cell's warm recycling matrix.

    ``request.state`` is the cell's ``SamState`` (warm); without one a fresh matrix (cold).
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
    """Why the cell's ``sam_decoding`` section cannot run, or None: a setting out of range, a bad tree,
    or a static corpus REST would refuse (missing, another tokenizer, the scored dataset's answers in it)."""
    from lade_bench.rest_datastore import datastore_refusal

    try:
        section = sam_settings(settings)
    except DecodingConfigError as err:
        return str(err)
    if section.static_datastore is None:
        return None
    return datastore_refusal(section.static_datastore, cell.tokenizer, cell.dataset, cell.dataset_path, STATIC_SETTING)


def hashed_sam_decoding(section: str, value: dict[str, Any]) -> dict[str, Any]:
    """The ``sam_decoding`` section as it enters the cell id.

    Without a static corpus, neither ``static_datastore`` nor ``len_bias`` (which then changes nothing)
    enters it: cells recorded before the option keep their ids. With one, the corpus enters by its
    content hash, as REST's datastore does (``methods/rest.py``'s ``hashed_rest``).
    """
    from lade_bench.rest_datastore import DatastoreError, read_manifest

    path = value.get("static_datastore")
    if path is None:
        return {k: v for k, v in value.items() if k not in ("static_datastore", "len_bias")}
    try:
        identity = read_manifest(path, STATIC_SETTING)["content_hash"]
    except DatastoreError:
        return value  # refuse_sam_decoding stops such a cell before it runs
    return {**value, "static_datastore": f"sha256:{identity}"}
