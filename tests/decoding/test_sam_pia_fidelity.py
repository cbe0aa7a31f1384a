"""SAM-Decoding and PIA draft as their authors' code does, step by step (issue 65's fidelity tests).

The fixtures hold the authors' own drafts on fixed token streams, recorded once by
``scripts/record_sam_pia_drafts.py`` from their code at the commit each fixture names
(hyx1999/SAM-Decoding's ``DraftModel`` with ``DynSAM``, ``StaticSAM`` and ``TokenRecycle``;
alipay/PainlessInferenceAcceleration's ``LookaheadCache``), with the protocol each fixture states. Here
our drafters run the same requests in a row on one cell state, each through the function the engine
starts a request with, and every step's draft (and SAM's match lengths and draft kind) must be theirs;
acceptance on the fixed stream decides the next step on both sides, so one wrong step shows up at once.
No model: the streams stand for a greedy target's output and SAM's fallback reads a fixed logits table.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from lade_bench.decoding.core.tree import DraftTree
from lade_bench.decoding.drafters.draft_tree import TreeStep
from lade_bench.decoding.drafters.pia import PiaSettings, new_pia_state, start_pia_request
from lade_bench.decoding.drafters.sam_decoding import SamSettings, new_sam_state, start_sam_request
from lade_bench.rest_datastore.build import write_datastore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


SAM = _fixture("sam_decoding_authors_drafts.json")
PIA = _fixture("pia_authors_drafts.json")


def _accepted(tree: DraftTree, following: list[int]) -> list[int]:
    """The path (node indices, root excluded) greedy verification accepts when the target emits
    ``following``: the longest root path the stream continues with, the first such node in index order
    (the recording script's rule)."""
    depth, best = {0: 0}, 0
    for node in range(1, tree.size):
        parent = tree.parents[node]
        if parent in depth and depth[parent] < len(following) and tree.tokens[node] == following[depth[parent]]:
            depth[node] = depth[parent] + 1
            best = node if depth[node] > depth[best] else best
    return tree.path_to(best)


def _paths(tokens: list[int], parents: list[int]) -> list[tuple[int, ...]]:
    """A tree as its root paths (root excluded), sorted: the same tree whatever its node order."""
    paths: list[tuple[int, ...]] = [()]
    for node in range(1, len(tokens)):
        paths.append((*paths[parents[node]], tokens[node]))
    return sorted(paths[1:])


def _logits(tokens: list[int], positions: list[int]) -> torch.Tensor:
    """The fixture's fixed logits: a row per (token + position), one row for token 0 everywhere."""
    rows = SAM["logits_rows"]
    return torch.tensor(
        [rows[(t + p) % len(rows)] if t else SAM["padding_row"] for t, p in zip(tokens, positions, strict=True)]
    )


def _sam_state(configuration: dict[str, Any], tmp_path: Path) -> tuple[SamSettings, Any]:
    static = None
    if configuration["static_documents"] is not None:  # their StaticSAM.build ends each document with EOS
        corpus = [t for document in configuration["static_documents"] for t in (*document, SAM["static_eos"])]
        vocab = len(SAM["logits_rows"][0])
        static = str(write_datastore(tmp_path / "static", [corpus], tokenizer="fixture", vocab_size=vocab))
    settings = SamSettings(**configuration["settings"], static_datastore=static)
    return settings, new_sam_state(settings)


@pytest.mark.parametrize("configuration", SAM["configurations"], ids=lambda c: c["name"])
def test_sam_decoding_drafts_the_authors_drafts_step_by_step(configuration, tmp_path):
    settings, state = _sam_state(configuration, tmp_path)
    tree_parents = SAM["tree_parents"]
    kinds = set()
    for r, request in enumerate(configuration["requests"]):
        prompt, output = request["prompt"], request["output"]
        run = start_sam_request(state, settings, prompt)
        drafter = run.drafter
        assert run.prefill_observer is not None
        run.prefill_observer(_logits(prompt, list(range(len(prompt)))))
        context = [*prompt, output[0]]
        for s, step in enumerate(request["steps"]):
            where = f"{configuration['name']} request {r} step {s}"
            chains, statics = drafter.chain_steps, drafter.static_steps
            tree: DraftTree = drafter.propose(context)
            kind = (
                "tree" if drafter.chain_steps == chains else "static" if drafter.static_steps > statics else "dynamic"
            )
            static_match = 0 if drafter.static is None else drafter.static.length
            ours = (context[-1], drafter.automaton.match_length, static_match, kind)
            assert ours == (step["start"], step["dynamic_match"], step["static_match"], step["kind"]), where
            if kind == "tree":
                assert _paths(list(tree.tokens), list(tree.parents)) == _paths(step["draft"], tree_parents), where
            else:  # their chain: n_predicts tokens, the start token first, padded with 0
                assert list(tree.tokens) == [t for t in step["draft"] if t != 0], where
            i = len(context) - len(prompt) - 1
            path = _accepted(tree, output[i + 1 :])
            assert len(path) == step["accepted"], where
            logits = _logits(list(tree.tokens), [len(context) - 1 + d for d in tree.depths()])
            accepted = output[i + 1 : i + 2 + len(path)]  # the accepted drafts and the next token
            drafter.observe(TreeStep(tree, len(context) - 1, logits, accepted, path))
            context += accepted
            kinds.add(kind)
        assert len(context) == len(prompt) + len(output), f"{configuration['name']} request {r}: steps left over"
    # The fixture exercises what it claims: chains and trees, and static chains where a corpus is given.
    assert kinds == ({"tree", "dynamic", "static"} if configuration["static_documents"] else {"tree", "dynamic"})


def _pia_settings(configuration: dict[str, Any]) -> PiaSettings:
    cache = configuration["cache"]
    return PiaSettings(
        **configuration["settings"], max_nodes=cache["max_node"], max_output_nodes=cache["max_output_node"]
    )


def _run_pia(configuration: dict[str, Any], settings: PiaSettings) -> list[tuple[str, list[int], list[int]]]:
    """Our drafts on the fixture's requests in a row on one trie: (where, tokens, parents) per step."""
    state = new_pia_state(settings)
    stop = PIA["stop_id"]
    drafts = []
    for r, request in enumerate(configuration["requests"]):
        prompt, output = request["prompt"], request["output"]
        run = start_pia_request(state, settings, prompt, [stop])
        context = [*prompt, output[0]]
        for s, step in enumerate(request["steps"]):
            tree = run.drafter.propose(context)
            drafts.append((f"{configuration['name']} request {r} step {s}", list(tree.tokens), list(tree.parents)))
            i = len(context) - len(prompt) - 1
            context += output[i + 1 : i + 2 + step["accepted"]]  # the authors' acceptance drives both
        assert run.close is not None
        run.close(context)
    return drafts


@pytest.mark.parametrize("configuration", PIA["configurations"], ids=lambda c: c["name"])
def test_pia_drafts_the_authors_drafts_step_by_step(configuration):
    steps = [step for request in configuration["requests"] for step in request["steps"]]
    drafts = _run_pia(configuration, _pia_settings(configuration))
    assert len(drafts) == len(steps)
    for (where, tokens, parents), step in zip(drafts, steps, strict=True):
        assert (tokens, parents) == (step["draft"], step["parents"]), where


def test_pia_without_the_earlier_prompts_drafts_less_than_the_authors():
    """The named deviation (our rule before issue 65) is a different draft on the fixture's warm trie."""
    configuration = PIA["configurations"][0]
    authors = _run_pia(configuration, _pia_settings(configuration))
    without = _run_pia(configuration, replace(_pia_settings(configuration), draft_earlier_prompts=False))
    smaller = [a[0] for a, w in zip(authors, without, strict=True) if len(w[1]) < len(a[1])]
    assert smaller and all(len(w[1]) <= len(a[1]) for a, w in zip(authors, without, strict=True))
