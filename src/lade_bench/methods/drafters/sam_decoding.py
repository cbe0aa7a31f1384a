"""SAM-Decoding's declaration, its static corpus's refusal and its cell id.

The engine is ``lade_bench.decoding.drafters.sam_decoding`` (which cites the paper and the authors' code and
states the defaults). Its optional static corpus is a REST datastore (``lade_bench.rest_datastore``): the word
``reference`` resolved, refused, and named in the cell id, by REST's own code (``methods/datastore_setting.py``).
Its tables' label names the configuration that ran (``describe_sam_decoding``: the Token Recycling tree, and
a static corpus when one was set). The fallback's recycling matrix and the static corpus (loaded once) persist
across a cell's requests (``request.state`` is the cell's ``SamState``: warm; without one a fresh matrix:
cold); the automaton is per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lade_bench.decoding.drafters.sam_decoding import (
    SAM_N_PREDICTS,
    SAM_TREE,
    SAM_TREE_TEMPLATES,
    STATIC_SETTING,
    SamSettings,
    new_sam_state,
    sam_decoding_generate,
    sam_decoding_reach,
)
from lade_bench.methods.budget import Budget, subtree
from lade_bench.methods.datastore_setting import datastore_refusal, hashed_datastore, resolved_datastore
from lade_bench.methods.drafter_method import declare_drafter
from lade_bench.methods.registry import CellFacts

# The chain length (the authors' 40 tokens per chain step, 16 and 8) and the fallback tree (the authors'
# 60-node template, and its 21 nodes with every rank below 2, at most 4 deep).
BUDGET = Budget(
    {
        "n_predicts": (8, 16, SAM_N_PREDICTS),
        "tree": (SAM_TREE, subtree(SAM_TREE_TEMPLATES[SAM_TREE], 2, 4)),
    }
)


def refuse_static_corpus(settings: SamSettings, cell: CellFacts) -> str | None:
    """Why the static corpus cannot serve the cell, or None: one REST would refuse (missing, another
    tokenizer, the scored dataset's answers in it); no corpus named: None."""
    if settings.static_datastore is None:
        return None
    return datastore_refusal(settings.static_datastore, STATIC_SETTING, cell)


def resolve_sam_decoding(section: dict[str, Any], cell: CellFacts) -> dict[str, Any]:
    """The ``sam_decoding`` section with ``static_datastore: reference`` replaced by the folder of the
    reference datastore of the cell's tokenizer (``Method.resolve``, REST's resolver), so the cell is the
    same as one naming that folder; unchanged for a folder, null, or a reference datastore not built
    (``refuse_static_corpus`` then says how to build it)."""
    return resolved_datastore(section, "static_datastore", STATIC_SETTING, cell)


def hashed_sam_decoding(section: str, value: dict[str, Any]) -> dict[str, Any]:
    """The ``sam_decoding`` section as it enters the cell id: a static corpus by its content hash, as REST's
    datastore (``methods/drafters/rest.py``'s ``hashed_rest``). Without one, the section as it is: the
    cell-id compatibility table (``runner/id_compat.py``) leaves ``static_datastore`` and ``len_bias`` out.
    """
    if value.get("static_datastore") is None:
        return dict(value)
    return hashed_datastore(value, "static_datastore", STATIC_SETTING)


def describe_sam_decoding(section: Mapping[str, Any]) -> str:
    """The label of the SAM-Decoding configuration a cell ran, from its recorded ``sam_decoding`` section.

    Ours is always the authors' Token Recycling fallback (``tree_method token_recycle``), never the EAGLE-2
    tree Spec-Bench's ``eval.sh`` and leaderboard row run (no EAGLE drafter offline): the label says so, and
    says when a static corpus was added (the authors' script adds one; ours is off by default). A cell
    recorded before ``static_datastore`` existed lacks the key and ran without a corpus.
    """
    fallback = "Token Recycling tree"
    if section.get("static_datastore") is not None:
        fallback += " + static corpus"
    return f"SAM-Decoding ({fallback})"


DRAFTER = declare_drafter(
    "sam_decoding",
    label="SAM-Decoding",
    color="#17becf",
    custom_mask=True,  # its fallback is a tree
    settings=SamSettings,
    engine=sam_decoding_generate,
    reach=sam_decoding_reach,
    new_state=new_sam_state,
    refusals=(refuse_static_corpus,),
    resolve=resolve_sam_decoding,  # `static_datastore: reference` -> the reference datastore (REST's resolver)
    hashed=hashed_sam_decoding,  # the static corpus by its content hash; without one, ids as before
    describe=describe_sam_decoding,  # which fallback and whether a static corpus: tables name the configuration
    after="suffix_decoding",
    budget=BUDGET,
)
