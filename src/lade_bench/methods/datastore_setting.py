"""A method setting that names a REST datastore (``rest.datastore``, ``sam_decoding.static_datastore``): the
word resolved, the refusal and the cell-id identity, written once for every method that reads a datastore.

Nothing here imports torch (the plan reads it); the datastore itself is ``lade_bench.rest_datastore``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lade_bench.methods.registry import CellFacts


def datastore_refusal(value: str, setting: str, cell: CellFacts, outputs: Sequence[str] = ()) -> str | None:
    """Why the datastore ``value`` (a folder or ``reference``) cannot serve the cell, or None: not built,
    missing, a damaged file, of another tokenizer, or holding text of the cell's dataset or of the model's
    own ``outputs`` (the token leak check). ``setting`` names the config key in the messages."""
    from lade_bench.rest_datastore.reader import DatastoreError
    from lade_bench.rest_datastore.reference import resolve_datastore
    from lade_bench.rest_datastore.refusal import datastore_refusal as refusal

    try:  # the reference datastore when it was not built: the message gives the command that builds it
        path = resolve_datastore(value, cell.tokenizer, cell.model_cache_dir, setting)
    except DatastoreError as err:
        return str(err)
    return refusal(
        path,
        cell.tokenizer,
        cell.dataset,
        cell.dataset_path,
        setting,
        outputs=outputs,
        cache_dir=cell.model_cache_dir,
    )


def resolved_datastore(section: dict[str, Any], key: str, setting: str, cell: CellFacts) -> dict[str, Any]:
    """``section`` with ``section[key] == "reference"`` replaced by the reference datastore's folder for the
    cell's tokenizer (``Method.resolve``), so the cell is the same as one naming that folder; unchanged for a
    folder, null, or a reference datastore not built (the method's refusal then says how to build it)."""
    from lade_bench.rest_datastore.reader import DatastoreError
    from lade_bench.rest_datastore.reference import resolve_datastore

    value = section.get(key)
    if value is None:
        return section
    try:
        return {**section, key: resolve_datastore(value, cell.tokenizer, cell.model_cache_dir, setting)}
    except DatastoreError:
        return section


def hashed_datastore(value: dict[str, Any], key: str, setting: str) -> dict[str, Any]:
    """``value`` with the datastore folder at ``key`` replaced by its content hash, as it enters the cell id:
    two datastores never share a cell, and one moved to another folder keeps its cells (unchanged when the
    folder has no readable manifest: the method's refusal stops such a cell before it runs)."""
    from lade_bench.rest_datastore.reader import DatastoreError, read_manifest

    try:
        identity = read_manifest(value[key], setting)["content_hash"]
    except DatastoreError:
        return value
    return {**value, key: f"sha256:{identity}"}
