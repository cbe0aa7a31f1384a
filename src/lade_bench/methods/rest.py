"""The ``rest`` method's registry glue: its engine as a ``DrafterMethod`` (generate, reach, state), refusals, the
datastore word resolved, cell id.

The engine is ``lade_bench.decoding.rest`` (docs/rest.md); the datastore and its leak check are
``lade_bench.rest_datastore``. Nothing here imports torch at module scope (the plan reads it).
"""

from __future__ import annotations

from typing import Any

from lade_bench.decoding.rest import RestSettings, new_rest_state, rest_generate, rest_reach
from lade_bench.methods.drafter_method import DrafterMethod
from lade_bench.methods.registry import CellFacts, Settings

# The datastore is the per-cell state: loaded once (``request.state``; without one it is loaded) and
# never changed. Its reach is a tree at most ``draft_length`` deep with ``num_draft`` nodes below cur.
REST = DrafterMethod("rest", RestSettings, rest_generate, new_rest_state, rest_reach)


def refuse_rest(settings: Settings, cell: CellFacts) -> str | None:
    """Why a cell cannot run REST, before anything loads: a bad setting, no datastore, a datastore of
    another tokenizer, or one holding the cell's scored dataset's reference answers."""
    from lade_bench.rest_datastore import REFERENCE, DatastoreError, build_command, datastore_refusal, resolve_datastore

    section = REST.checked(settings)
    if isinstance(section, str):
        return section
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
