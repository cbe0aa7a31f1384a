"""SAM-Decoding's registry pieces: its engine as a ``DrafterMethod``, its refusal and its cell id.

The engine is ``lade_bench.decoding.drafters.sam_decoding`` (which cites the paper and the authors' code and
states the defaults); the section ``sam_decoding`` is its :class:`SamSettings`. Its optional static
corpus is a REST datastore (``lade_bench.rest_datastore``): the word ``reference`` resolved, refused,
and named in the cell id, by REST's own code. The engine module imports torch only inside its
functions: the registry is read before torch loads.
"""

from __future__ import annotations

from typing import Any

from lade_bench.decoding.drafters.sam_decoding import (
    STATIC_SETTING,
    SamSettings,
    new_sam_state,
    sam_decoding_generate,
    sam_decoding_reach,
)
from lade_bench.methods.datastore_setting import datastore_refusal, hashed_datastore, resolved_datastore
from lade_bench.methods.drafter_method import DrafterMethod
from lade_bench.methods.registry import CellFacts, Settings

# The per-cell state is the fallback tree's recycling matrix and the static corpus, loaded once (the
# automaton is per request): ``request.state`` is the cell's ``SamState`` (warm), without one a fresh
# matrix (cold). Its reach is a full chain or the fallback tree, whichever is longer.
SAM_DECODING = DrafterMethod("sam_decoding", SamSettings, sam_decoding_generate, new_sam_state, sam_decoding_reach)


def refuse_sam_decoding(settings: Settings, cell: CellFacts) -> str | None:
    """Why the cell's ``sam_decoding`` section cannot run, or None: a setting out of range, a bad tree,
    or a static corpus REST would refuse (missing, another tokenizer, the scored dataset's answers in it)."""
    section = SAM_DECODING.checked(settings)
    if isinstance(section, str):
        return section
    if section.static_datastore is None:
        return None
    return datastore_refusal(section.static_datastore, STATIC_SETTING, cell)


def resolve_sam_decoding(section: dict[str, Any], cell: CellFacts) -> dict[str, Any]:
    """The ``sam_decoding`` section with ``static_datastore: reference`` replaced by the folder of the
    reference datastore of the cell's tokenizer (``Method.resolve``, REST's resolver), so the cell is the
    same as one naming that folder; unchanged for a folder, null, or a reference datastore not built
    (``refuse_sam_decoding`` then says how to build it)."""
    return resolved_datastore(section, "static_datastore", STATIC_SETTING, cell)


def hashed_sam_decoding(section: str, value: dict[str, Any]) -> dict[str, Any]:
    """The ``sam_decoding`` section as it enters the cell id.

    Without a static corpus, neither ``static_datastore`` nor ``len_bias`` (which then changes nothing)
    enters it: cells recorded before the option keep their ids. With one, the corpus enters by its
    content hash, as REST's datastore does (``methods/rest.py``'s ``hashed_rest``).
    """
    if value.get("static_datastore") is None:
        return {k: v for k, v in value.items() if k not in ("static_datastore", "len_bias")}
    return hashed_datastore(value, "static_datastore", STATIC_SETTING)
