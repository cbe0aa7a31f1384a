"""Token Recycling at its defaults drafts what the authors' code drafts, step by step.

The fixture was recorded from the authors' own ``recycling_forward`` (github.com/Luowaterbi/TokenRecycling,
``evaluation/inference_recycling.py``; Luo et al., ACL 2025, arXiv 2408.08696) by
``scripts/record_token_recycling_drafts.py``, which names their commit and says what it changed to run it
on the CPU. Both sides run the suite's tiny float64 llama on the same two prompts, one adjacency matrix
for both (warm, as the authors run a benchmark); every forward's fed tokens (the prefill's, then each
step's root and 80 drafted nodes), the accepted lengths and the tokens must be equal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lade_bench.decoding.drafters.token_recycling import (
    RecyclingState,
    TokenRecyclingSettings,
    token_recycling_generate,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "token_recycling_authors_drafts.json"


@pytest.fixture(scope="module")
def authors() -> dict:
    """The recorded run of the authors' code."""
    return json.loads(FIXTURE.read_text())


def _generate_recording(model, *args, **kwargs):
    """``token_recycling_generate(model, *args, **kwargs)`` and the input ids of each of its forwards.

    A forward pre-hook on the model sees every forward; the generation's own are its last ``steps`` (the
    model-support probe may run some before).
    """
    fed: list[list[int]] = []
    handle = model.register_forward_pre_hook(
        lambda _module, _args, kw: fed.append(kw["input_ids"][0].tolist()), with_kwargs=True
    )
    try:
        result = token_recycling_generate(model, *args, **kwargs)
    finally:
        handle.remove()
    return result, fed[-result.steps :]


def test_the_default_loop_feeds_and_accepts_what_the_authors_code_does(tiny_models, authors):
    model = tiny_models[authors["model"]["tiny_model"]["architecture"]]
    settings = TokenRecyclingSettings()  # the defaults are the authors'
    assert (settings.top_k, settings.tree) == (authors["top_k"], authors["tree_version"])
    state = RecyclingState(settings.top_k)
    # Their loop stops at the first step after which more than max_new_tokens tokens are committed, one
    # more (the next root) chosen: ours, which counts that token as emitted, stops there at this budget.
    budget = authors["max_new_tokens"] + 2
    for request in authors["requests"]:
        result, fed = _generate_recording(
            model, request["prompt"], budget, settings, state=state, eos_token_id=authors["eos_token_id"]
        )
        assert fed[0] == request["prefill_fed"]  # the prompt but its last token
        steps = request["steps"]
        assert len(fed) - 1 == len(steps)
        for number, (ours, theirs) in enumerate(zip(fed[1:], steps, strict=True)):
            assert ours == theirs["fed"], f"prompt {request['prompt']}: decode step {number} drafts differ"
        assert result.accept_lengths[0] == 0  # the prefill emits nothing: the first step gives the first token
        # Every step's accepted length; the last one ours cuts at the budget.
        assert result.accept_lengths[1:-1] == [s["accept_length"] for s in steps[:-1]]
        assert result.accept_lengths[-1] <= steps[-1]["accept_length"]
        shared = min(len(result.tokens), len(request["committed"]))
        assert shared >= authors["max_new_tokens"]
        assert result.tokens[:shared] == request["committed"][:shared]


def test_our_earlier_loop_is_kept_as_named_settings_and_drafts_otherwise(tiny_models, authors):
    model = tiny_models[authors["model"]["tiny_model"]["architecture"]]
    request = authors["requests"][0]
    earlier = TokenRecyclingSettings(prefill_refresh=True, loop="whole_prompt_prefill")
    _, fed = _generate_recording(model, request["prompt"], 8, earlier)
    assert fed[0] == request["prompt"]  # the whole prompt, its logits refreshing the matrix
    assert fed[1][0] != request["steps"][0]["fed"][0]  # the first tree is rooted at the first emitted token


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"loop": "spec_bench"}, r"token_recycling.loop='spec_bench' is not allowed: use one of \['authors', "),
        ({"prefill_refresh": "yes"}, r"token_recycling.prefill_refresh='yes' is not allowed: use true or false"),
    ],
)
def test_a_bad_loop_setting_is_refused_by_name(settings, message):
    from lade_bench.decoding import DecodingConfigError

    with pytest.raises(DecodingConfigError, match=message):
        TokenRecyclingSettings(**settings)
