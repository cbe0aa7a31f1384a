"""REST at its defaults drafts the trees the authors' own retriever drafts, step by step.

The fixture was recorded by ``scripts/record_rest_drafts.py`` from the authors' ``draftretriever`` 0.1.0,
the wheel github.com/FasterDecoding/REST ships (``DraftRetriever/wheels``, the same file in Spec-Bench
fd2c1cd; ``Reader.search`` and ``cut_to_choices`` in ``DraftRetriever/src/lib.rs``; He et al., NAACL 2024,
arXiv 2311.08252), which names their commit and the wheel's sha256: their ``Writer`` built a datastore
from six standard-library modules' SmolLM2 token ids, and a greedy generation emitting a seventh
module's text (``ntpath.py``) was replayed with their ``Reader.search`` at the defaults (``num_draft``
64, spans 16 down to 2, 5,000 matches, 10 tokens), each step searched 24 times; a step where no span
retrieves anything drafts their fixed guess, token 100 after cur (``random_index = 100`` in
``rest/model/utils.py`` ``generate_candidates_and_draft_buffer``: Python, so the script transcribes it,
citing the commit; the step is marked ``guess``). Here our datastore is built from the same ids and the
same steps are replayed with our drafter at its defaults.

Ties: their heap and cut take tied nodes in the order of randomly seeded Rust hash maps, so on some
steps their own runs disagree (the fixture records each tree seen). Where every run agreed, ours must
be their tree exactly, with the same accepted length; where they disagree, ours is one deterministic
pick, and the replay's totals (nodes drafted, tokens accepted) must be close to their runs' average.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from lade_bench.decoding.drafters.rest import RestDrafter, RestSettings, RestState
from lade_bench.rest_datastore.build import write_datastore
from lade_bench.rest_datastore.reader import load_datastore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rest_authors_drafts.json"


def _ids(encoded: str) -> list[int]:
    """The fixture's token ids (base64 of little-endian uint16)."""
    return np.frombuffer(base64.b64decode(encoded), dtype="<u2").astype(int).tolist()


def _nodes(leaves) -> set[tuple[int, ...]]:
    """A trie's nodes (root-to-node token paths) from its leaves."""
    return {tuple(leaf[: d + 1]) for leaf in leaves for d in range(len(leaf))}


def _accepted(nodes, text: list[int], position: int) -> int:
    """What a greedy target emitting ``text`` accepts from the tree at ``position``: its longest path the
    text continues with (the fixture's rule)."""
    return max((len(p) for p in nodes if tuple(text[position : position + len(p)]) == p), default=0)


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """The authors' recording, the query's ids, and our tree's nodes at each recorded step."""
    authors = json.loads(FIXTURE.read_text())
    documents = [_ids(d) for d in authors["datastore"]["documents"]]
    store = load_datastore(
        write_datastore(
            tmp_path_factory.mktemp("rest") / "ds", documents, tokenizer=authors["tokenizer"], vocab_size=49_152
        )
    )
    settings = authors["settings"]
    drafter = RestDrafter(
        RestState(store),
        RestSettings(
            num_draft=settings["num_draft"],
            max_token_span=settings["max_token_span"],
            max_matches=settings["max_matches"],
            draft_length=settings["draft_length"],
        ),
    )
    text = _ids(authors["query"]["ids"])
    ours = []
    for step in authors["steps"]:
        tree = drafter.propose(text[: step["position"]])
        paths: list[tuple[int, ...]] = [()]
        for token, parent in zip(tree.tokens[1:], tree.parents[1:], strict=True):
            paths.append((*paths[parent], token))
        ours.append(set(paths[1:]))
    return authors, text, ours


def test_where_the_authors_runs_agree_our_tree_and_acceptance_are_theirs(replay):
    authors, text, ours = replay
    agreed = [(i, s) for i, s in enumerate(authors["steps"]) if len(s["trees"]) == 1]
    retrieved = [i for i, s in agreed if not s["trees"][0]["guess"]]
    # Most steps have one answer, and many retrieve a draft (the rest find no suffix: the guess).
    assert len(agreed) >= 0.7 * len(authors["steps"]) and len(retrieved) >= 50
    for i, step in agreed:
        (tree,) = step["trees"]
        assert ours[i] == _nodes(tree["leaves"]), f"step {i} (position {step['position']})"
        assert len(ours[i]) == tree["nodes"]
        assert _accepted(ours[i], text, step["position"]) == tree["accepted"]
    # The authors' trees are small: about a third of num_draft nodes at most, never 64 (the former rule).
    assert max(s["trees"][0]["nodes"] for _, s in agreed) < authors["settings"]["num_draft"] // 2


def test_where_the_authors_runs_disagree_our_totals_are_their_average(replay):
    authors, text, ours = replay
    steps = authors["steps"]
    tied = [i for i, s in enumerate(steps) if len(s["trees"]) > 1]
    assert tied  # the recording does hold ties: this comparison is not empty

    def average(step, key):
        seen = sum(t["seen"] for t in step["trees"])
        return sum(t[key] * t["seen"] for t in step["trees"]) / seen

    their_nodes = sum(average(steps[i], "nodes") for i in range(len(steps)))
    their_accepted = sum(average(steps[i], "accepted") for i in range(len(steps)))
    our_nodes = sum(len(tree) for tree in ours)
    our_accepted = sum(_accepted(tree, text, s["position"]) for tree, s in zip(ours, steps, strict=True))
    assert abs(our_nodes / their_nodes - 1) < 0.05
    assert abs(our_accepted / their_accepted - 1) < 0.05


def test_where_nothing_is_retrieved_we_draft_the_authors_guess_after_cur(replay):
    """Their miss (utils.py at the fixture's commit): the tree [cur, 100], accepted as the text says."""
    authors, text, ours = replay
    guessed = [i for i, s in enumerate(authors["steps"]) if s["trees"][0]["guess"]]
    assert len(guessed) >= 20 and authors["settings"]["no_match_guess"] == 100
    for i in guessed:
        (tree,) = authors["steps"][i]["trees"]  # a miss has one answer: no tie decides it
        assert tree["leaves"] == [[100]] and ours[i] == {(100,)}, f"step {i}"
        assert _accepted(ours[i], text, authors["steps"][i]["position"]) == tree["accepted"]
