"""SAM-Decoding's parts: the suffix automaton against a brute force, the chain it drafts, the switch to
the recycling tree below ``len_threshold``, the per-request automaton beside the per-cell matrix, the
refused settings, and exact generation with drafts accepted; the static corpus (a REST datastore): its
match against a brute force, the authors' ``len_bias`` rule between the two matches, and exact
generation with its chains accepted.

Exactness on every architecture is the registry-wide grid's (tests/decoding/test_method_exactness.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lade_bench.decoding import DecodingConfigError
from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.drafters.sam_decoding import (
    CHAIN_STEPS_STAT,
    SAM_LEN_BIAS,
    SAM_LEN_THRESHOLD,
    SAM_N_PREDICTS,
    SAM_TOP_K,
    SAM_TREE,
    STATIC_STEPS_STAT,
    TREE_STEPS_STAT,
    SamDecodingDrafter,
    SamSettings,
    SamState,
    StaticMatch,
    SuffixAutomaton,
    new_sam_state,
    sam_decoding_generate,
)
from lade_bench.methods import GenerationRequest, get_method, run_generation
from lade_bench.methods.registry import configuration_label
from lade_bench.models.tiny import tiny_model
from lade_bench.rest_datastore.build import suffix_array_of, write_datastore
from lade_bench.rest_datastore.reader import DatastoreError, load_datastore
from lade_bench.runner.rows import decode_step_means

from .test_sampling_distribution import ALPHA, LENGTH, SAMPLING, goodness_of_fit, setting  # noqa: F401 (fixture)


def _longest_earlier_suffix(text: Sequence[int]) -> tuple[int, int]:
    """Brute force: (L, e), L the longest suffix of ``text`` occurring in ``text[:-1]``, e the end index
    of its first occurrence there (-1 when L = 0)."""
    best = (0, -1)
    for length in range(1, len(text)):
        suffix = list(text[-length:])
        ends = [j + length - 1 for j in range(len(text) - length) if list(text[j : j + length]) == suffix]
        if not ends:
            break  # a longer suffix contains this one, so it cannot occur either
        best = (length, min(ends))
    return best


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=60))
def test_every_extension_yields_the_longest_earlier_suffix_and_its_first_occurrence(tokens):
    automaton = SuffixAutomaton()
    for i, token in enumerate(tokens):
        automaton.extend(token)
        length, first_end = _longest_earlier_suffix(tokens[: i + 1])
        assert automaton.match_length == length
        assert automaton.first_end(automaton.match_state) == first_end
    # Blumer et al.'s bound: at most 2n - 1 states (the root included) for n >= 2 tokens.
    assert automaton.states <= max(2, 2 * len(tokens) - 1)


def test_a_chain_continues_the_first_occurrence_and_stops_before_the_newest_token():
    run = list(range(100, 160))  # seen once
    automaton = SuffixAutomaton()
    for token in [*run, *run[:7]]:
        automaton.extend(token)
    assert automaton.match_length == 7
    assert automaton.continuation(SAM_N_PREDICTS) == run[7 : 7 + SAM_N_PREDICTS - 1]
    assert automaton.continuation(5) == run[7:11]  # n_predicts counts cur: 4 drafted
    short = SuffixAutomaton()
    for token in [1, 2, 3, 4, 5, 6, 1, 2, 3]:
        short.extend(token)
    # The first occurrence of "1 2 3" is followed by 4 5 6 1 2 before the newest token (the authors' text).
    assert short.continuation(40) == [4, 5, 6, 1, 2]


def test_a_match_with_a_short_continuation_moves_to_an_earlier_shorter_match():
    # "6 7 8" first occurs late, followed by 60 6 7 only; "7 8" first occurs early, followed by 50...
    early, late = [7, 8, 50, 51, 52, 53, 54, 55], [6, 7, 8, 60]
    automaton = SuffixAutomaton()
    for token in [*early, *late, 6, 7, 8]:
        automaton.extend(token)
    assert automaton.match_length == 3
    assert automaton.continuation(5) == [50, 51, 52, 53]  # to the suffix link "7 8": 4 tokens after it
    assert automaton.continuation(3) == [60, 6]  # enough after "6 7 8" itself: no move


def _drafter(len_threshold: int = SAM_LEN_THRESHOLD, state: SamState | None = None) -> SamDecodingDrafter:
    settings = SamSettings(len_threshold=len_threshold)
    return SamDecodingDrafter(new_sam_state(settings) if state is None else state, settings)


@pytest.mark.parametrize("threshold", [3, SAM_LEN_THRESHOLD, 8])
def test_a_match_of_len_threshold_drafts_a_chain_and_a_shorter_one_the_recycling_tree(threshold):
    run = list(range(200, 260))
    tree_nodes = SamSettings().template().size + 1
    for matched in (threshold - 1, threshold):
        drafter = _drafter(threshold)
        draft = drafter.propose([*run, *run[:matched]])
        if matched < threshold:
            assert (drafter.tree_steps, drafter.chain_steps) == (1, 0)
            assert draft.size == tree_nodes and not draft.is_chain()
        else:
            assert (drafter.tree_steps, drafter.chain_steps) == (0, 1)
            assert draft.is_chain() and draft.tokens == (run[matched - 1], *run[matched : matched + SAM_N_PREDICTS - 1])


def test_the_automaton_is_the_request_s_own_and_the_matrix_is_shared():
    run = list(range(300, 340))
    state = new_sam_state(SamSettings())
    first = _drafter(state=state)
    assert first.propose([*run, *run[:6]]).is_chain()
    second = _drafter(state=state)  # a new request: its automaton has not seen ``run``
    assert not second.propose([1, *run[:6]]).is_chain()
    assert second.recycling.state is first.recycling.state


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("n_predicts", 1, "sam_decoding.n_predicts=1 is not allowed: use an integer >= 2"),
        ("len_threshold", 0, "sam_decoding.len_threshold=0 is not allowed: use an integer >= 1"),
        ("len_threshold", 2.5, "sam_decoding.len_threshold=2.5 is not allowed: use an integer >= 1"),
        ("top_k", 0, "sam_decoding.top_k=0 is not allowed: use an integer >= 1"),
        ("top_k", 4, r"sam_decoding.tree node \d+ \[\d+\]: rank 4 is not in \[0, top_k=4\)"),  # samd needs 7
        ("tree", "2.2.3", r"sam_decoding.tree='2.2.3' is not a known template; use one of \['2.2.2', 'samd'\]"),
        ("tree", [[0], [0]], r"sam_decoding.tree node 1 \[0\] repeats an earlier node"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(key, value, message):
    with pytest.raises(DecodingConfigError, match=message):
        SamSettings(**{key: value})


def test_the_authors_defaults_and_fallback_tree_and_a_state_of_another_width_is_refused():
    template = SamSettings().template()
    assert (SAM_N_PREDICTS, SAM_LEN_THRESHOLD, SAM_TOP_K, SAM_LEN_BIAS) == (40, 5, 8, 5)  # samd_config.py
    assert SamSettings().static_datastore is None  # the authors' NullStaticSAM: no static corpus unless named
    assert SAM_TREE == "samd" and (template.size, template.depth) == (60, 5)
    # Nodes per depth of samd/config/token_recycle.json.
    assert [len(nodes) for nodes, _, _ in template.layers] == [7, 20, 21, 8, 4]
    with pytest.raises(DecodingConfigError, match="a SAM-Decoding state of top_k=4 cannot run top_k=8"):
        sam_decoding_generate(None, [1, 2], 4, state=SamState(4))


@pytest.fixture(scope="module")
def model():
    """A tiny float64 Llama whose peaked outputs repeat (so drafts are accepted), its checks run once."""
    return tiny_model("llama", init_scale=3.0)


def test_generation_matches_ar_with_chains_and_trees_accepted_and_the_matrix_kept(model):
    prompt = [5, 6, 7, 8, 9, 10] * 4
    reference = autoregressive_generate(model, prompt, 40).tokens
    state = new_sam_state(SamSettings())
    first = sam_decoding_generate(model, prompt, 40, state=state)
    filled = state.size()
    again = sam_decoding_generate(model, prompt, 40, state=state)
    assert first.tokens == reference and again.tokens == reference
    assert filled > len(set(prompt)) and state.size() >= filled
    for result in (first, again):
        assert result.method == "sam_decoding"
        assert result.stats[CHAIN_STEPS_STAT] > 0 and result.stats[TREE_STEPS_STAT] > 0
        assert result.stats[CHAIN_STEPS_STAT] + result.stats[TREE_STEPS_STAT] == result.steps - 1
        assert decode_step_means(result)["mean_accepted"] > 1.0  # drafts were accepted
        assert sum(result.accept_lengths) == len(result.tokens) and len(result.step_tokens or []) == result.steps


@pytest.mark.slow
def test_sampling_matches_the_exact_distribution(setting):  # noqa: F811 (the shared fixture)
    """Sampled continuations follow AR sampling's exact distribution (the enumeration of
    test_sampling_distribution.py). A threshold of 2 over the 8-token vocabulary's repeats makes
    chains (a trigram seen before) as well as trees, from a matrix warmed across the draws."""
    model, prompt, sequences, exact = setting
    state = SamState(8)
    draws, multi_token_steps, chains, trees = [], 0, 0.0, 0.0
    for seed in range(800):
        result = sam_decoding_generate(
            model, prompt, LENGTH, SamSettings(len_threshold=3, n_predicts=4), state=state, sampling=SAMPLING, seed=seed
        )
        draws.append(tuple(result.tokens))
        multi_token_steps += sum(n > 1 for n in result.accept_lengths)
        chains += result.stats[CHAIN_STEPS_STAT]
        trees += result.stats[TREE_STEPS_STAT]
    assert multi_token_steps > 100 and chains > 100 and trees > 100
    assert goodness_of_fit(draws, sequences, exact) > ALPHA


# ---- The static corpus (a REST datastore) ----


def _brute_static(corpus: Sequence[int], context: Sequence[int], n_predicts: int) -> tuple[int, list[int]]:
    """Brute force: the longest suffix of ``context`` occurring in ``corpus`` and the tokens (at most
    ``n_predicts - 1``) after its first occurrence there."""
    best = (0, -1)
    for length in range(1, len(context) + 1):
        suffix = list(context[-length:])
        starts = [j for j in range(len(corpus) - length + 1) if list(corpus[j : j + length]) == suffix]
        if not starts:
            break  # a longer suffix contains this one
        best = (length, min(starts))
    length, start = best
    return length, ([] if length == 0 else list(corpus[start + length : start + length + n_predicts - 1]))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=50),
    st.lists(st.integers(0, 4), min_size=1, max_size=40),  # 4 never occurs in the corpus
    st.integers(2, 6),
)
def test_the_static_match_is_the_longest_context_suffix_in_the_corpus_and_its_first_occurrence(
    corpus, context, n_predicts
):
    tokens = np.asarray(corpus, dtype=np.uint32)
    match = StaticMatch(tokens, suffix_array_of(tokens))
    for i, token in enumerate(context):
        match.extend(token)
        length, after = _brute_static(corpus, context[: i + 1], n_predicts)
        assert match.length == length
        assert match.continuation(n_predicts) == after


# The static-vs-dynamic cases: the context ends with TAIL; its last ``dynamic`` tokens occurred once
# before in it (then 70 71 72 80), and the corpus holds its last ``static`` tokens (then 100, 101, ...).
TAIL = list(range(1, 13))
DYNAMIC_AFTER = [70, 71, 72, 80]
STATIC_AFTER = list(range(100, 160))


def _static_case(tmp_path: Path, dynamic: int, static: int) -> tuple[list[int], Path]:
    context = [*([60, *TAIL[len(TAIL) - dynamic :], *DYNAMIC_AFTER[:3]] if dynamic else []), 80, *TAIL]
    corpus = [90, *TAIL[len(TAIL) - static :], *STATIC_AFTER]
    path = write_datastore(tmp_path / f"static_{dynamic}_{static}", [corpus], tokenizer="test", vocab_size=200)
    return context, path


@pytest.mark.parametrize(
    ("dynamic", "static", "len_bias", "drafted"),
    [
        (6, 11, SAM_LEN_BIAS, "dynamic"),  # 11 - 5 = 6: a tie goes to the dynamic match (match_dyn >= match_static)
        (6, 12, SAM_LEN_BIAS, "static"),  # 12 - 5 = 7 > 6
        (7, 3, SAM_LEN_BIAS, "dynamic"),
        (0, 9, SAM_LEN_BIAS, "tree"),  # 9 - 5 = 4 < len_threshold 5, no dynamic match
        (4, 9, SAM_LEN_BIAS, "tree"),  # neither reaches 5
        (0, 10, SAM_LEN_BIAS, "static"),  # 10 - 5 = 5 reaches it
        (4, 10, SAM_LEN_BIAS, "static"),  # a dynamic match below the threshold loses to a penalised 5
        (6, 8, 1, "static"),  # a smaller penalty: 8 - 1 = 7 > 6
        (6, 6, 0, "dynamic"),  # no penalty: a tie still goes to the dynamic match
    ],
)
def test_len_bias_decides_between_the_static_and_the_dynamic_match_as_the_authors_lookup(
    tmp_path, dynamic, static, len_bias, drafted
):
    context, path = _static_case(tmp_path, dynamic, static)
    settings = SamSettings(len_bias=len_bias, static_datastore=str(path))
    drafter = SamDecodingDrafter(new_sam_state(settings), settings)
    draft = drafter.propose(context)
    assert (drafter.automaton.match_length, drafter.static.length) == (dynamic, static)
    if drafted == "tree":
        assert not draft.is_chain() and drafter.tree_steps == 1
        return
    after = STATIC_AFTER if drafted == "static" else [*DYNAMIC_AFTER, *TAIL[:-1]]  # read before cur
    assert draft.is_chain() and draft.tokens == (TAIL[-1], *after[: SAM_N_PREDICTS - 1])
    assert (drafter.chain_steps, drafter.static_steps) == (1, int(drafted == "static"))


def test_without_a_static_corpus_the_dynamic_match_and_the_tree_decide_alone(tmp_path):
    context, _ = _static_case(tmp_path, 6, 12)  # the corpus that would win above is not named
    drafter = _drafter()
    assert drafter.static is None
    assert drafter.propose(context).tokens == (TAIL[-1], *DYNAMIC_AFTER, *TAIL[:-1])


def test_a_state_is_refused_for_another_static_corpus_and_a_missing_one_names_the_setting(model, tmp_path):
    _, first = _static_case(tmp_path, 0, 10)
    _, second = _static_case(tmp_path, 0, 11)
    state = new_sam_state(SamSettings(static_datastore=str(first)))
    with pytest.raises(DecodingConfigError, match=f"sam_decoding.static_datastore='{second}' is not the static"):
        sam_decoding_generate(model, [1, 2], 4, SamSettings(static_datastore=str(second)), state=state)
    with pytest.raises(DecodingConfigError, match="sam_decoding.static_datastore=None is not the static corpus"):
        sam_decoding_generate(model, [1, 2], 4, state=state)
    with pytest.raises(DatastoreError, match="sam_decoding.static_datastore='/nonexistent/ds': no REST datastore"):
        sam_decoding_generate(model, [1, 2], 4, SamSettings(static_datastore="/nonexistent/ds"))
    wide = write_datastore(tmp_path / "wide", [[5, 150_000]], tokenizer="test", vocab_size=262_144)
    vocab = model.get_input_embeddings().num_embeddings
    with pytest.raises(DecodingConfigError, match=f"holds token id 150000, beyond this model's vocabulary of {vocab}"):
        sam_decoding_generate(model, [1, 2], 4, SamSettings(static_datastore=str(wide)))


def test_static_chains_are_drafted_accepted_and_exact_through_the_registry(model, tmp_path):
    """The corpus holds the prompt and what the tiny model generates from it, as the exactness grid's
    REST datastore does: the static chains are accepted, and the output stays AR's."""
    prompt = [3, 14, 15, 92, 65, 35, 89, 79]
    reference = autoregressive_generate(model, prompt, 40).tokens
    vocab = model.get_input_embeddings().num_embeddings
    path = write_datastore(tmp_path / "static", [prompt + reference], tokenizer="embedded:smollm2", vocab_size=vocab)
    settings = {"sam_decoding": SamSettings(static_datastore=str(path))}
    method = get_method("sam_decoding")
    state = method.new_state(settings)
    assert state.static.content_hash == load_datastore(path).content_hash
    for _ in range(2):  # the corpus is loaded once and serves every request of the cell
        request = GenerationRequest({"replica": model}, prompt, 40, settings=settings, state=state)
        result = run_generation(method, request)
        assert result.tokens == reference
        assert result.stats[STATIC_STEPS_STAT] > 0 and decode_step_means(result)["mean_accepted"] > 1.0
    assert state.requests_seen == 2
    without = sam_decoding_generate(model, prompt, 40)
    assert without.tokens == reference and without.stats[STATIC_STEPS_STAT] == 0


def test_the_label_names_the_token_recycling_fallback_and_a_static_corpus():
    """Ours is the authors' Token Recycling fallback, not Spec-Bench's EAGLE-2 row; cells recorded before
    ``static_datastore`` existed ran without a corpus."""
    recorded = {"n_predicts": 40, "len_threshold": 5, "top_k": 8, "tree": "samd"}
    assert configuration_label("sam_decoding", recorded) == "SAM-Decoding (Token Recycling tree)"
    assert configuration_label("sam_decoding", {**recorded, "len_bias": 5, "static_datastore": None}) == (
        "SAM-Decoding (Token Recycling tree)"
    )
    with_corpus = {**recorded, "len_bias": 5, "static_datastore": "/data/datastores/own_responses"}
    assert configuration_label("sam_decoding", with_corpus) == "SAM-Decoding (Token Recycling tree + static corpus)"
