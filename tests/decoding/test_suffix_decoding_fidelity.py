"""SuffixDecoding's drafter equals the authors' own plugin step by step (issue 65's fidelity test).

The fixture ``tests/fixtures/suffix_decoding_authors_drafts.json`` holds the drafts of ArcticInference's
own driver of the suffix cache (``GPUModelRunnerPatch._update_suffix_cache`` and
``propose_suffix_draft_token_ids`` in ``arctic_inference/vllm/model_runner.py``, github.com/snowflakedb/
ArcticInference, the commit it names; Oliaro et al., NeurIPS 2025, arXiv 2411.04975), recorded by
``scripts/record_suffix_drafts.py`` on fixed token sequences, requests in a row on one cache. Our drafter
is driven with the same tokens: the same draft at every step, and the same accepted length against the
same greedy target, at the plugin's defaults (ours by default) and on a two-request cache at vLLM's
depth with a width of 8.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from lade_bench.decoding.drafters.suffix_decoding import SuffixDecodingDrafter, SuffixSettings, new_suffix_state

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "suffix_decoding_authors_drafts.json"


def _authors() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def _ours(config: dict[str, Any], *, defaults: bool) -> SuffixSettings:
    """Our settings for a recorded plugin config: ours by default, or the recorded values named."""
    if defaults:
        return SuffixSettings()
    return SuffixSettings(
        max_tree_depth=config["suffix_cache_max_depth"],
        max_cached_requests=config["suffix_cache_max_requests"],
        max_spec_tokens=config["num_speculative_tokens"],
        max_spec_factor=config["suffix_max_spec_factor"],
        min_token_prob=config["suffix_min_token_prob"],
    )


def test_our_defaults_are_the_plugins_as_its_config_sets_them():
    config = _authors()["cases"]["plugin_defaults"]["config"]
    assert config["suffix_max_spec_offset"] == 0.0  # the one setting we do not expose: its default
    assert dataclasses.asdict(SuffixSettings()) == dataclasses.asdict(_ours(config, defaults=False))


@pytest.mark.parametrize(("case", "defaults"), [("plugin_defaults", True), ("small_cache", False)])
def test_our_drafts_equal_the_plugins_step_by_step(case, defaults):
    recorded = _authors()["cases"][case]
    settings = _ours(recorded["config"], defaults=defaults)
    state = new_suffix_state(settings)  # one cache for the requests in order, as the fixture ran them
    steps = 0
    for number, request in enumerate(recorded["requests"]):
        prompt, target = request["prompt"], request["target"]
        drafter = SuffixDecodingDrafter(state, settings, prompt)
        context = list(prompt)
        for step, authors in enumerate(request["steps"]):
            context += authors["sampled"]
            tree = drafter.propose(context)
            draft = list(tree.tokens[1:])
            where = f"{case}: request {number}, step {step}"
            assert draft == authors["draft"], where
            assert list(tree.parents[1:]) == list(range(len(draft))), where  # a chain below cur
            done = len(context) - len(prompt)
            accepted = next(
                (i for i, t in enumerate(draft) if done + i >= len(target) or t != target[done + i]), len(draft)
            )
            assert accepted == authors["accepted"], where
            steps += 1
        drafter.close(context)
    assert steps == sum(len(r["steps"]) for r in recorded["requests"])
    # The fixture exercises what distinguishes the plugin's call: drafts cut at the width, and eviction.
    if case == "plugin_defaults":
        cut = [s for r in recorded["requests"] for s in r["steps"] if len(s["draft"]) == settings.max_spec_tokens]
        assert cut
    else:
        assert len(state.cached_requests()) == settings.max_cached_requests < len(recorded["requests"])
