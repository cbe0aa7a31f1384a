"""The ``rest`` method's registry glue: generate, refusals, the datastore word resolved, reach, state, cell id.

The engine is ``lade_bench.decoding.rest`` (docs/rest.md); the datastore and its leak check are
``lade_bench.rest_datastore``. Nothing here imports torch at module scope (the plan reads it).
"""

from __future__ import annotations

from typing import Any

from lade_bench.decoding.rest import RestSettings
from lade_bench.methods.registry import CellFacts, GenerationRequest, Settings
from lade_bench.methods.state import use_state


def rest_settings(settings: Settings) -> RestSettings:
    """The ``rest`` section as the engine's checked ``RestSettings`` (absent: the defaults)."""
    return RestSettings(**GenerationRequest({}, (), 1, settings=settings).section("rest"))


def generate_rest(request: GenerationRequest) -> Any:
    """REST (``settings["rest"]``) on the cell's loaded datastore (``request.state``; without one it is loaded)."""
    from lade_bench.decoding.rest import rest_generate

    model = request.model
    return use_state(
        request.state,
        lambda: new_rest_state(request.settings),
        lambda state: rest_generate(
            model,
            request.prompt_ids,
            request.max_new_tokens,
            eos_token_id=list(request.stop_ids),
            seed=request.seed,
            sampling=request.sampling,
            state=state,
            **request.section("rest"),
        ),
    )


def new_rest_state(settings: Settings) -> Any:
    """The cell's datastore, loaded once (``Method.new_state``)."""
    from lade_bench.decoding.rest import new_rest_state as load

    return load(rest_settings(settings))


def rest_reach(settings: Settings) -> Any:
    """The deepest and widest tree REST feeds at these settings."""
    from lade_bench.decoding.rest import rest_reach as reach

    return reach(rest_settings(settings))


def refuse_rest(settings: Settings, cell: CellFacts) -> str | None:
    """Why a cell cannot run REST, before anything loads: a bad setting, no datastore, a datastore of
    another tokenizer, or one holding the cell's scored dataset's reference answers."""
    from lade_bench.decoding.params import DecodingConfigError
    from lade_bench.rest_datastore import REFERENCE, DatastoreError, build_command, datastore_refusal, resolve_datastore

    try:
        section = rest_settings(settings)
    except DecodingConfigError as err:
        return str(err)
    if section.datastore is None:
        return (
            f"rest.datastore is not set: REST drafts from a datastore; build one with "
            f"{build_command(cell.tokenizer or '<model>')} and pass rest.datastore=PATH, or use "
            f"rest.datastore={REFERENCE} (the reference datastore)"
        )
    try:  # the reference datastore when it was not built: the message gives the command that builds it
        path = resolve_datastore(section.datastore, cell.tokenizer, cell.model_cache_dir)
    except DatastoreError as err:
        return str(err)
    return datastore_refusal(path, cell.tokenizer, cell.dataset, cell.dataset_path)


def resolve_rest(section: dict[str, Any], cell: CellFacts) -> dict[str, Any]:
    """The ``rest`` section with ``datastore: reference`` replaced by the reference datastore's folder for
    the cell's tokenizer (``Method.resolve``); unchanged when it names a folder, or when that datastore is
    not built (``refuse_rest`` then says how to build it)."""
    from lade_bench.rest_datastore import DatastoreError, resolve_datastore

    value = section.get("datastore")
    try:
        path = resolve_datastore(value, cell.tokenizer, cell.model_cache_dir) if value is not None else None
    except DatastoreError:
        return section
    return {**section, "datastore": path}


def hashed_rest(section: str, value: dict[str, Any]) -> dict[str, Any]:
    """The ``rest`` section as it enters the cell id: the datastore by its content hash, not its path.

    Two datastores never share a cell, and one datastore moved to another folder keeps its cells.
    """
    from lade_bench.rest_datastore import DatastoreError, read_manifest

    path = value.get("datastore")
    if path is None:
        return value
    try:
        identity = read_manifest(path)["content_hash"]
    except DatastoreError:
        return value  # refuse_rest stops such a cell before it runs
    return {**value, "datastore": f"sha256:{identity}"}
