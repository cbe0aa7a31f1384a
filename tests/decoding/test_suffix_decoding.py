"""SuffixDecoding's drafter over the authors' suffix trees: matching, scoring, draft length, eviction, shapes.

The trees are arctic-inference's (the authors' C++); these tests pin what our drafter makes of them:
which suffix proposes, in which order, how long a draft may be, what the global tree keeps across
requests and how a draft becomes the seam's ``DraftTree``. Exactness on every architecture is the
registry-wide grid's (tests/decoding/test_method_exactness.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from lade_bench.decoding import DecodingConfigError
from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.drafters.suffix_decoding import (
    SUFFIX_MAX_CACHED_REQUESTS,
    SUFFIX_MAX_TREE_DEPTH,
    SuffixDecodingDrafter,
    SuffixDecodingState,
    SuffixSettings,
    draft_tree_of,
    new_suffix_state,
    suffix_decoding_generate,
)
from lade_bench.models.tiny import tiny_model
from lade_bench.runner.rows import decode_step_means

from .test_sampling_distribution import ALPHA, LENGTH, SAMPLING, goodness_of_fit, setting  # noqa: F401 (fixture)


def _draft(
    context: Sequence[int], prompt_len: int | None = None, state: SuffixDecodingState | None = None, **settings
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(tokens, parents) below the root of the draft for ``context``, its first ``prompt_len`` tokens the prompt."""
    chosen = SuffixSettings(**settings)
    state = new_suffix_state(chosen) if state is None else state
    prompt = list(context[: len(context) if prompt_len is None else prompt_len])
    drafter = SuffixDecodingDrafter(state, chosen, prompt)
    tree = drafter.propose(list(context))
    drafter.close(list(context))
    assert tree.tokens[0] == context[-1]
    return tree.tokens[1:], tree.parents[1:]


def test_the_longest_matching_suffix_proposes_its_continuation():
    # "11 12" is followed by 13 once and by 14 once; "10 11 12" only by 13 (then 20, 11): the longer match wins.
    prompt = [10, 11, 12, 13, 20, 11, 12, 14]
    tokens, parents = _draft([*prompt, 10, 11, 12], prompt_len=len(prompt))
    assert tokens == (13, 20, 11)
    assert parents == (0, 1, 2)


@pytest.mark.parametrize(("factor", "max_spec_tokens"), [(1.0, 24), (2.0, 24), (2.0, 4), (0.5, 24)])
def test_a_match_of_length_m_drafts_at_most_factor_times_m_tokens(factor, max_spec_tokens):
    run = list(range(100, 140))  # seen once, in the prompt
    for matched in (1, 2, 5):
        tokens, _ = _draft(
            [*run, *run[:matched]], prompt_len=len(run), max_spec_factor=factor, max_spec_tokens=max_spec_tokens
        )
        expected = min(int(factor * matched), max_spec_tokens)
        assert tokens == tuple(run[matched : matched + expected]), (matched, factor)


def test_drafting_stops_below_the_minimum_token_probability():
    run = list(range(100, 120))
    # The matched suffix occurs twice (in the prompt and at the context's end), once with a
    # continuation: every drafted token has estimated probability 1/2.
    assert len(_draft([*run, *run[:4]], prompt_len=len(run), min_token_prob=0.5)[0]) == 4
    assert _draft([*run, *run[:4]], prompt_len=len(run), min_token_prob=0.6) == ((), ())


def test_the_most_frequent_continuation_comes_first_in_a_chain_and_a_tree():
    # "1 2" -> 3 twice (then 7 or 8), -> 4 once: estimated probabilities 1/2 for 3, 1/4 for 4, 7 and 8.
    prompt = [1, 2, 3, 7, 1, 2, 3, 8, 1, 2, 4, 9, 50]
    chain, chain_parents = _draft([*prompt, 1, 2], prompt_len=len(prompt), max_spec_factor=2.0)
    assert chain[0] == 3 and chain[1] in (7, 8)
    assert chain_parents == tuple(range(len(chain)))
    tree, parents = _draft([*prompt, 1, 2], prompt_len=len(prompt), max_spec_factor=2.0, use_tree_spec=True)
    under_root = [token for token, parent in zip(tree, parents, strict=True) if parent == 0]
    assert under_root == [3, 4]  # both continuations, the more frequent first
    assert sorted(tree) == [3, 4, 7, 8]  # max_spec_factor x match length 2 = 4 nodes, best-first


def test_a_tree_draft_becomes_a_branching_draft_tree_and_a_chain_a_chain():
    tree = draft_tree_of(5, [3, 7, 4, 8], [-1, 0, -1, 2])
    assert tree.tokens == (5, 3, 7, 4, 8)
    assert tree.parents == (-1, 0, 1, 0, 3)
    assert not tree.is_chain() and tree.depth == 2
    chain = draft_tree_of(5, [3, 7], [-1, 0])
    assert chain.is_chain() and chain.size == 3
    assert draft_tree_of(5, [], []).size == 1  # no match: the step feeds cur alone


def _finish(state: SuffixDecodingState, prompt: list[int], output: list[int]) -> None:
    """One request through the drafter: ``output`` emitted after ``prompt``."""
    drafter = SuffixDecodingDrafter(state, SuffixSettings(max_cached_requests=state.max_cached_requests), prompt)
    drafter.propose([*prompt, output[0]])
    drafter.close([*prompt, *output])


def test_the_global_tree_drafts_from_an_earlier_request_output_and_a_cold_state_does_not():
    earlier = [30, 31, 32, 33, 34, 35]
    warm = SuffixDecodingState()
    _finish(warm, [1], earlier)
    assert warm.size() == len(earlier) and warm.cached_requests() == [0]
    assert _draft([2, 30, 31], state=warm)[0] == (32, 33)
    assert _draft([2, 30, 31])[0] == ()  # a fresh state knows only this request
    no_global = SuffixDecodingState(max_cached_requests=0)
    _finish(no_global, [1], earlier)
    assert no_global.size() == 0
    assert _draft([2, 30, 31], state=no_global, max_cached_requests=0)[0] == ()


def test_the_global_tree_keeps_the_newest_max_cached_requests_outputs():
    state = SuffixDecodingState(max_cached_requests=2)
    outputs = [[40, 41, 42, 43], [50, 51, 52, 53, 54], [60, 61, 62, 63]]
    for output in outputs:
        _finish(state, [1], output)
    assert state.cached_requests() == [1, 2]  # the oldest evicted
    assert state.size() == len(outputs[1]) + len(outputs[2])
    assert _draft([2, 60, 61], state=state, max_cached_requests=2)[0] == (62, 63)
    # A running request's output takes a slot too (the authors' cache): starting it evicted request 1.
    assert state.cached_requests() == [2, 3]
    assert _draft([2, 50, 51], state=state, max_cached_requests=2)[0] == ()
    assert _draft([2, 40, 41], state=state, max_cached_requests=2)[0] == ()


def test_token_ids_past_65535_are_drafted_intact():
    run = [70_000 + 1_000 * i for i in range(20)]
    prompt = [*run, 5]
    assert _draft([*prompt, *run[:3]], prompt_len=len(prompt))[0] == tuple(run[3:6])


def test_suffixes_are_cut_at_the_tree_depth():
    run = list(range(200, 240))
    # Depth 4: a context suffix longer than 4 tokens is never matched, so a draft stays within 4 tokens.
    tokens, _ = _draft([*run, *run[:10]], prompt_len=len(run), max_tree_depth=4, max_spec_factor=4.0)
    assert 0 < len(tokens) <= 4 * 3  # a match of at most depth - 1 = 3 tokens (the authors' loop)
    assert tokens == tuple(run[10 : 10 + len(tokens)])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("max_tree_depth", 0, "suffix_decoding.max_tree_depth=0 is not allowed: use an integer >= 1"),
        ("max_spec_tokens", 1.5, "suffix_decoding.max_spec_tokens=1.5 is not allowed: use an integer >= 1"),
        ("max_cached_requests", -1, "suffix_decoding.max_cached_requests=-1 is not allowed: use an integer >= 0"),
        ("max_cached_requests", 2**31, r"use an integer in \[0, 2147483647\]"),
        ("max_spec_factor", -0.5, "suffix_decoding.max_spec_factor=-0.5 is not allowed: use a number >= 0"),
        ("min_token_prob", 1.5, r"suffix_decoding.min_token_prob=1.5 is not allowed: use a number in \[0, 1\]"),
        ("use_tree_spec", "yes", "suffix_decoding.use_tree_spec='yes' is not allowed: use true or false"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(key, value, message):
    with pytest.raises(DecodingConfigError, match=message):
        SuffixSettings(**{key: value})


def test_a_state_serves_only_the_bounds_it_was_built_with():
    state = SuffixDecodingState(max_tree_depth=8)
    mine, theirs = (8, SUFFIX_MAX_CACHED_REQUESTS), (SUFFIX_MAX_TREE_DEPTH, SUFFIX_MAX_CACHED_REQUESTS)
    with pytest.raises(DecodingConfigError, match=re.escape(f"{mine} cannot run {theirs}")):
        state.check(SuffixSettings())


@pytest.fixture(scope="module")
def model():
    """A tiny float64 Llama whose peaked outputs repeat (so drafts are accepted), its checks run once."""
    return tiny_model("llama", init_scale=3.0)


@pytest.mark.parametrize("use_tree_spec", [False, True])
def test_generation_matches_ar_and_a_warm_state_drafts_more_on_a_repeated_request(model, use_tree_spec):
    prompt = [5, 6, 7, 8, 9, 10] * 4
    reference = autoregressive_generate(model, prompt, 32).tokens
    state = SuffixDecodingState()
    first = suffix_decoding_generate(model, prompt, 32, SuffixSettings(use_tree_spec=use_tree_spec), state=state)
    again = suffix_decoding_generate(model, prompt, 32, SuffixSettings(use_tree_spec=use_tree_spec), state=state)
    assert first.tokens == reference and again.tokens == reference
    assert state.cached_requests() == [0, 1] and state.size() == 64
    # The second request finds the whole first output in the global tree.
    assert again.steps < first.steps
    assert decode_step_means(again)["mean_accepted"] > decode_step_means(first)["mean_accepted"]
    for result in (first, again):
        assert result.method == "suffix_decoding"
        assert len(result.accept_lengths) == result.steps == len(result.step_tokens or [])
        assert sum(result.accept_lengths) == len(result.tokens)


@pytest.mark.slow
def test_sampling_matches_the_exact_distribution(setting):  # noqa: F811 (the shared fixture)
    """Sampled continuations follow AR sampling's exact distribution (the enumeration of
    test_sampling_distribution.py), with trees drafted from a warm global tree. Every token is drafted
    (no minimum probability) and drafts run long, so most steps verify branching trees; a chain is
    the seam's sampled chain, which prompt lookup's distribution test covers."""
    model, prompt, sequences, exact = setting
    state = SuffixDecodingState()
    draws, multi_token_steps = [], 0
    for seed in range(800):
        result = suffix_decoding_generate(
            model, prompt, LENGTH, SuffixSettings(use_tree_spec=True, min_token_prob=0.0, max_spec_factor=4.0),
            state=state, sampling=SAMPLING, seed=seed,
        )  # fmt: skip
        draws.append(tuple(result.tokens))
        multi_token_steps += sum(n > 1 for n in result.accept_lengths)
    assert multi_token_steps > 100  # drafts were accepted, not only rejected
    assert goodness_of_fit(draws, sequences, exact) > ALPHA


def test_the_configuration_label_names_the_values_that_differ_from_the_plugins_defaults():
    import dataclasses
    import json
    from pathlib import Path

    import yaml

    from lade_bench.methods.registry import configuration_label

    assert configuration_label("suffix_decoding", dataclasses.asdict(SuffixSettings())) == "SuffixDecoding"
    # The committed Spec-Bench cells recorded vLLM's values explicitly: their label says so.
    cells = Path(__file__).resolve().parents[2] / "paper_figures/spec_bench/rows/spec_bench/cells.json"
    recorded = [yaml.safe_load(cell["config_text"]) for cell in json.loads(cells.read_text())]
    sections = [config["suffix_decoding"] for config in recorded if "suffix_decoding" in config["arms"]]
    assert sections and {configuration_label("suffix_decoding", s) for s in sections} == {
        "SuffixDecoding (depth 24, 10,000 requests, width 24)"
    }
    # A key missing from a recorded section reads as vLLM's value, the default until issue 65.
    assert configuration_label("suffix_decoding", {}) == "SuffixDecoding (depth 24, 10,000 requests, width 24)"
    named = {"max_cached_requests": 0, "max_spec_factor": 2.0, "min_token_prob": 0.25, "use_tree_spec": True}
    assert configuration_label("suffix_decoding", {**dataclasses.asdict(SuffixSettings()), **named}) == (
        "SuffixDecoding (no global tree, factor 2, min prob 0.25, tree)"
    )
