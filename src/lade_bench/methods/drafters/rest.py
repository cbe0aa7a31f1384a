"""REST's declaration and the glue its datastore needs: the refusal, the word ``reference`` resolved, the cell id.

The engine is ``lade_bench.decoding.drafters.rest`` (docs/rest.md); the datastore and its leak check are
``lade_bench.rest_datastore``. Nothing here imports torch at module scope (the plan reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lade_bench.decoding.drafters.rest import (
    MOST_FREQUENT_NODES,
    REST_NO_MATCH_GUESS,
    REST_NUM_DRAFT,
    REST_TREE_BUDGET,
    RestSettings,
    new_rest_state,
    rest_generate,
    rest_reach,
)
from lade_bench.methods.budget import Budget
from lade_bench.methods.datastore_setting import datastore_refusal, hashed_datastore, resolved_datastore
from lade_bench.methods.drafter_method import declare_drafter
from lade_bench.methods.registry import CellFacts
from lade_bench.rest_datastore.reader import SETTING

# The draft budget per step (the authors' 64, down to 4), read as rest.tree_budget says.
BUDGET = Budget({"num_draft": (4, 8, 16, 32, REST_NUM_DRAFT)})


def refuse_rest(settings: RestSettings, cell: CellFacts) -> str | None:
    """Why a cell cannot run REST, before anything loads: no datastore, a damaged datastore file, a datastore
    of another tokenizer, or one holding text of the cell's dataset or of the model outputs
    ``rest.leak_outputs`` names (the token leak check, ``rest_datastore.leak``)."""
    from lade_bench.rest_datastore.reader import REFERENCE, build_command

    if settings.datastore is None:
        return (
            f"rest.datastore is not set: REST drafts from a datastore; build one with "
            f"{build_command(cell.tokenizer or '<model>')} and pass rest.datastore=PATH, or use "
            f"rest.datastore={REFERENCE} (the reference datastore)"
        )
    return datastore_refusal(settings.datastore, SETTING, cell, settings.leak_output_paths())


def resolve_rest(section: dict[str, Any], cell: CellFacts) -> dict[str, Any]:
    """The ``rest`` section with ``datastore: reference`` replaced by the reference datastore's folder for
    the cell's tokenizer (``Method.resolve``); unchanged when it names a folder, or when that datastore is
    not built (``refuse_rest`` then says how to build it)."""
    return resolved_datastore(section, "datastore", SETTING, cell)


def hashed_rest(section: str, value: dict[str, Any]) -> dict[str, Any]:
    """The ``rest`` section as it enters the cell id: the datastore by its content hash, not its path.

    Two datastores never share a cell, and one datastore moved to another folder keeps its cells.
    ``leak_outputs`` never enters it, at any value: it feeds the plan's leak check, not a generated
    token.
    """
    value = {k: v for k, v in value.items() if k != "leak_outputs"}
    return value if value.get("datastore") is None else hashed_datastore(value, "datastore", SETTING)


def describe_rest(section: Mapping[str, Any]) -> str:
    """The label of the REST configuration a cell recorded (``Method.describe``): ``REST`` at the authors'
    tree budget (``cut_to_choices``) and no-match guess (100); each of ours named in parentheses:
    ``64 most frequent nodes`` (its recorded ``num_draft``), ``no guess on a miss`` (``no_match_guess``
    null) or ``guess 7 on a miss`` (another token id).

    A section recorded before a key existed ran the only rule there was: without ``tree_budget``,
    ``most_frequent_nodes``; without ``no_match_guess``, no guess. Every REST cell committed before
    issue 65 lacks both: ``REST (64 most frequent nodes, no guess on a miss)``.
    """
    words = []
    if section.get("tree_budget", MOST_FREQUENT_NODES) != REST_TREE_BUDGET:
        words.append(f"{section.get('num_draft', REST_NUM_DRAFT)} most frequent nodes")
    guess = section.get("no_match_guess")
    if guess is None:
        words.append("no guess on a miss")
    elif guess != REST_NO_MATCH_GUESS:
        words.append(f"guess {guess} on a miss")
    return f"REST ({', '.join(words)})" if words else "REST"


DRAFTER = declare_drafter(
    "rest",
    label="REST",
    color="#637939",
    custom_mask=True,  # its draft is a trie of retrieved continuations
    settings=RestSettings,
    engine=rest_generate,
    reach=rest_reach,
    # The datastore is static: loaded once per cell and carried across its requests, never changed
    # (static_state: its rows are labelled static, not warm or cold).
    new_state=new_rest_state,
    static_state=True,
    refusals=(refuse_rest,),
    resolve=resolve_rest,  # `datastore: reference` -> the reference datastore of the cell's tokenizer
    hashed=hashed_rest,
    describe=describe_rest,  # "REST" at the authors' rules; ours named, e.g. "REST (no guess on a miss)"
    needs_resource=True,  # its default, the reference datastore, is built for the model before the run
    after="pia",
    budget=BUDGET,
)
