"""REST's retrieval and draft trie over a real datastore (suffix array of token ids), and its generation.

What only REST does: the longest context suffix found in the datastore, the continuations of its
occurrences, the trie pruned by frequency to the draft budget, ids past 65,535 (Gemma-3's real
tokenizer), the retrieval time reported apart, and the settings' refusals. Exactness on every
architecture is the registry-wide grid's (tests/decoding/test_method_exactness.py, with a datastore
built from the grid's own runs).
"""

from __future__ import annotations

import numpy as np
import pytest

from lade_bench.decoding import DecodingConfigError
from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.drafters.rest import (
    RETRIEVAL_STAT,
    RestDrafter,
    RestSettings,
    RestState,
    continuations,
    cut_to_choices,
    frequent_trie,
    longest_match,
    rest_generate,
    suffix_range,
)
from lade_bench.models.tiny import tiny_model
from lade_bench.rest_datastore.build import suffix_array_of, write_datastore
from lade_bench.rest_datastore.reader import DatastoreError, check_tokenizer, load_datastore
from lade_bench.runner.rows import decode_step_means

from .test_sampling_distribution import ALPHA, LENGTH, SAMPLING, VOCAB, goodness_of_fit, setting  # noqa: F401


def _store(tmp_path, documents, vocab=128, tokenizer="embedded:smollm2"):
    return load_datastore(write_datastore(tmp_path / "ds", documents, tokenizer=tokenizer, vocab_size=vocab))


def _draft(store, context, **settings) -> tuple[tuple[int, ...], tuple[int, ...]]:
    tree = RestDrafter(RestState(store), RestSettings(**settings)).propose(list(context))
    assert tree.tokens[0] == context[-1]
    return tree.tokens[1:], tree.parents[1:]


def test_the_suffix_array_sorts_token_ids_past_65535_by_value():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 262_144, size=2_000)
    tokens[::5] = 70_000  # repeats, so suffixes share prefixes across the 16-bit boundary
    expected = sorted(range(len(tokens)), key=lambda i: tokens[i:].tolist())
    assert suffix_array_of(tokens.astype(np.uint32)).tolist() == expected


def test_the_longest_suffix_found_retrieves_the_continuations_of_its_occurrences(tmp_path):
    store = _store(tmp_path, [[1, 2, 3, 4, 5, 6], [9, 3, 4, 7, 8], [3, 4, 7, 9]])
    tokens, sa = store.tokens, store.suffix_array
    start, end = suffix_range(tokens, sa, [3, 4])
    assert end - start == 3
    # [2, 3, 4] occurs once (the 4-token suffix [0, 2, 3, 4] does not): its continuation is drafted.
    span, start, end = longest_match(tokens, sa, [0, 2, 3, 4], max_span=16)
    assert (span, end - start) == (3, 1)
    assert continuations(tokens, sa, start, end, span, 10, 3).tolist() == [[5, 6, 9]]
    # max_token_span bounds the suffix: at 2 only [3, 4] is looked up, and its three continuations branch.
    assert longest_match(tokens, sa, [0, 2, 3, 4], max_span=2)[0] == 2
    assert _draft(store, [0, 2, 3, 4], max_token_span=2, draft_length=1) == ((5, 7), (0, 0))
    # The datastore's end cuts a continuation (no -1 reaches the draft).
    assert continuations(tokens, sa, *suffix_range(tokens, sa, [7, 9]), 2, 10, 3).tolist() == [[-1, -1, -1]]
    assert _draft(store, [5, 7, 9], no_match_guess=None) == ((), ())
    assert _draft(store, [5, 7, 9]) == ((100,), (0,))  # nothing retrieved: the authors' guess
    # Nothing found, not even the last two tokens: the authors' guess after cur (null: cur alone).
    assert longest_match(tokens, sa, [50, 51], max_span=16)[0] == 0
    assert _draft(store, [50, 51]) == ((100,), (0,))
    assert _draft(store, [50, 51], no_match_guess=None) == ((), ())


def test_the_trie_keeps_the_most_frequent_prefixes_within_the_draft_budget():
    # Sorted continuations, as the suffix array yields them: [5, 6] four times, [5, 7] twice, [8, 1] once.
    rows = np.array([[5, 6]] * 4 + [[5, 7]] * 2 + [[8, 1]])
    assert frequent_trie(rows, 10) == ([5, 8, 6, 7, 1], [-1, -1, 0, 0, 1])
    # Counts: 5 -> 6, 5.6 -> 4, 5.7 -> 2, 8 -> 1, 8.1 -> 1. A budget of 3 keeps 5, 5.6, 5.7.
    assert frequent_trie(rows, 3) == ([5, 6, 7], [-1, 0, 0])
    # A tie between a parent and its child keeps the parent first (8 before 8.1): always a trie.
    assert frequent_trie(rows, 4) == ([5, 8, 6, 7], [-1, -1, 0, 0])
    assert frequent_trie(rows[:0], 5) == ([], [])


def test_cut_to_choices_drops_the_paths_with_most_distinct_tokens_until_their_sum_fits():
    """The authors' ``cut_to_choices`` (DraftRetriever/src/lib.rs): each kept node is a path scored by its
    distinct tokens; the highest scores go first (ties: deeper, then later) until the sum fits."""
    rows = np.array([[5, 6]] * 4 + [[5, 7]] * 2 + [[8, 1]])
    tokens, parents = frequent_trie(rows, 10)  # 5, 8 (1 each), 5.6, 5.7, 8.1 (2 each): sum 8
    assert cut_to_choices(tokens, parents, 8) == (tokens, parents)
    # Budget 4: 8.1 then 5.7 go (score 2, the later first), leaving 1 + 1 + 2 = 4.
    assert cut_to_choices(tokens, parents, 4) == ([5, 8, 6], [-1, -1, 0])
    assert cut_to_choices(tokens, parents, 1) == ([5], [-1])
    # A repeated token counts once on its path (the authors' HashSet): the chain 3.3.3.4 scores
    # 1 + 1 + 1 + 2 = 5, where its lengths would sum to 10.
    assert cut_to_choices([3, 3, 3, 4], [-1, 0, 1, 2], 5) == ([3, 3, 3, 4], [-1, 0, 1, 2])
    assert cut_to_choices([3, 3, 3, 4], [-1, 0, 1, 2], 4) == ([3, 3, 3], [-1, 0, 1])


def test_num_draft_budgets_the_summed_path_lengths_by_default_and_nodes_at_most_frequent_nodes(tmp_path):
    rng = np.random.default_rng(1)
    store = _store(tmp_path, [rng.integers(3, 7, size=1_000).tolist()])
    context = [99, 4, 5]  # 99 is nowhere: the 2-token suffix, about 60 occurrences, hundreds of nodes
    default = RestDrafter(RestState(store), RestSettings()).propose(context)
    scores = [0]  # distinct tokens on each node's path
    paths: list[frozenset[int]] = [frozenset()]
    for token, parent in zip(default.tokens[1:], default.parents[1:], strict=True):
        paths.append(paths[parent] | {token})
        scores.append(len(paths[-1]))
    # The authors' rule: the kept paths' distinct-token counts sum to at most num_draft (64), and
    # dropping fewer would not fit: 36 nodes here, where the former rule drafts 64.
    assert 64 - 4 < sum(scores) <= 64 and 16 < default.size <= 40
    nodes = RestDrafter(RestState(store), RestSettings(tree_budget="most_frequent_nodes")).propose(context)
    assert nodes.size == 1 + 64


def test_the_configuration_label_names_our_rules_and_reads_old_cells_as_most_frequent_nodes_without_a_guess():
    from lade_bench.methods.registry import configuration_label

    authors = {"num_draft": 64, "tree_budget": "cut_to_choices", "no_match_guess": 100}
    assert configuration_label("rest", authors) == "REST"
    assert configuration_label("rest", {**authors, "num_draft": 32, "tree_budget": "most_frequent_nodes"}) == (
        "REST (32 most frequent nodes)"
    )
    assert configuration_label("rest", {**authors, "no_match_guess": None}) == "REST (no guess on a miss)"
    assert configuration_label("rest", {**authors, "no_match_guess": 7}) == "REST (guess 7 on a miss)"
    # Every REST cell committed before tree_budget and no_match_guess existed ran the 64 most frequent
    # nodes and drafted nothing on a miss.
    assert configuration_label("rest", {"num_draft": 64, "max_token_span": 16}) == (
        "REST (64 most frequent nodes, no guess on a miss)"
    )


def test_a_miss_drafts_the_authors_guess_after_cur_by_default_and_nothing_at_null(tmp_path):
    """rest/model/utils.py (FasterDecoding/REST 50a5fc1): no span retrieved -> ``random_index = 100``
    drafted after cur, a 2-token step; ``no_match_guess: null`` is ours before (cur alone)."""
    store = _store(tmp_path, [[3, 4, 5, 6, 7]])
    assert _draft(store, [9, 8]) == ((100,), (0,))
    assert _draft(store, [9, 8], no_match_guess=None) == ((), ())
    assert _draft(store, [9, 8], no_match_guess=17) == ((17,), (0,))
    # A retrieved suffix drafts its continuations, never the guess.
    assert _draft(store, [1, 3, 4]) == ((5, 6, 7), (0, 1, 2))


def test_the_draft_tree_never_exceeds_num_draft_nodes_or_draft_length_depth(tmp_path):
    rng = np.random.default_rng(1)
    documents = [rng.integers(3, 12, size=200).tolist() for _ in range(5)]
    store = _store(tmp_path, documents)
    for budget, length in [(64, 10), (7, 3), (1, 1)]:
        tree = RestDrafter(RestState(store), RestSettings(num_draft=budget, draft_length=length)).propose([4, 5, 6])
        assert 1 < tree.size <= budget + 1 and tree.depth <= length


def test_a_gemma3_tokenizer_datastore_holds_ids_past_65535_and_drafts_them(tmp_path):
    """Gemma-3's real 262,144-token tokenizer (the embedded model's, converted in the cache; read by the
    ``tokenizers`` library alone, three times faster than transformers' wrapper)."""
    from tokenizers import Tokenizer

    from lade_bench.models.loading import EMBEDDED_MODELS

    tokenizer = Tokenizer.from_file(str(EMBEDDED_MODELS["gemma3_270m"].folder(None) / "tokenizer.json"))
    text = "Die Quantenchromodynamik beschreibt die starke Wechselwirkung zwischen Quarks und Gluonen. " * 3
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    vocab = tokenizer.get_vocab_size()
    store = _store(tmp_path, [ids], vocab=vocab, tokenizer="embedded:gemma3_270m")
    assert vocab == 262_144 and max(ids) > 65_535 and store.tokens.tolist() == ids
    big = next(i for i, t in enumerate(ids) if t > 65_535 and i >= 2)
    drafted, _ = _draft(store, ids[:big], num_draft=1, draft_length=1)
    assert drafted == (ids[big],)
    with pytest.raises(
        DatastoreError, match="built with the tokenizer 'embedded:gemma3_270m'.*uses 'embedded:smollm2'"
    ):
        check_tokenizer(store.path, "embedded:smollm2")


@pytest.fixture(scope="module")
def model():
    """A tiny float64 Llama whose peaked outputs repeat (so drafts are accepted)."""
    return tiny_model("llama", init_scale=3.0)


def test_generation_matches_ar_drafts_from_the_datastore_and_reports_retrieval_time(model, tmp_path):
    prompt = [5, 6, 7, 8, 9, 10] * 4
    reference = autoregressive_generate(model, prompt, 32).tokens
    # Another text with the same continuations: REST drafts the output it never saw in this request.
    store = _store(tmp_path, [[40, 41, 42], prompt[-4:] + reference])
    result = rest_generate(model, prompt, 32, state=RestState(store))
    assert result.tokens == reference and result.method == "rest"
    assert result.steps < len(reference) / 2 and decode_step_means(result)["mean_accepted"] > 2
    assert 0 < result.stats[RETRIEVAL_STAT] < result.wall_time_s
    # Without a datastore holding the output, every step feeds cur and the authors' guess (100) and
    # emits one token (the target never picks 100 here), still AR's; with no guess, cur alone.
    other = RestState(_store(tmp_path / "other", [[40, 41, 42, 43]]))
    assert 100 not in reference[:8]
    guessed = rest_generate(model, prompt, 8, state=other)
    assert guessed.tokens == reference[:8] and guessed.steps == 8 and guessed.step_tokens[1:] == [2] * 7
    alone = rest_generate(model, prompt, 8, RestSettings(datastore=None, no_match_guess=None), state=other)
    assert alone.tokens == reference[:8] and alone.steps == 8 and alone.step_tokens[1:] == [1] * 7


def test_a_guess_the_target_would_emit_is_accepted_and_output_stays_ar(model, tmp_path):
    """The guess is a draft like any other: when the target's next token is the guess, it is accepted."""
    prompt = [5, 6, 7, 8, 9, 10] * 4
    reference = autoregressive_generate(model, prompt, 8).tokens
    other = RestState(_store(tmp_path, [[40, 41, 42, 43]]))
    guess = RestSettings(datastore=None, no_match_guess=reference[1])  # the token after the prefill's
    result = rest_generate(model, prompt, 8, guess, state=other)
    assert result.tokens == reference and result.accept_lengths[1] == 2


def test_a_datastore_with_ids_beyond_the_model_vocabulary_is_refused(model, tmp_path):
    store = _store(tmp_path, [[1, 2, 300]], vocab=49_152)
    with pytest.raises(DecodingConfigError, match="holds token id 300, beyond this model's vocabulary of 128"):
        rest_generate(model, [1, 2], 4, state=RestState(store))


def test_a_guess_beyond_the_model_vocabulary_is_refused(model, tmp_path):
    state = RestState(_store(tmp_path, [[1, 2, 3]]))
    with pytest.raises(
        DecodingConfigError, match=r"rest.no_match_guess=128 is not allowed for this model: use a token id below .* 128"
    ):
        rest_generate(model, [1, 2], 4, RestSettings(datastore=None, no_match_guess=128), state=state)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("max_token_span", 1, "rest.max_token_span=1 is not allowed: use an integer >= 2"),
        ("num_draft", 0, "rest.num_draft=0 is not allowed: use an integer >= 1"),
        ("max_matches", 0, "rest.max_matches=0 is not allowed: use an integer >= 1"),
        ("draft_length", 1.5, "rest.draft_length=1.5 is not allowed"),
        ("datastore", "", "rest.datastore='' is not allowed: use a datastore folder"),
        ("tree_budget", "widest", "rest.tree_budget='widest' is not allowed: use cut_to_choices .* or most_frequent"),
        ("no_match_guess", -1, r"rest.no_match_guess=-1 is not allowed: use a token id >= 0 .* or null"),
        ("no_match_guess", "100", r"rest.no_match_guess='100' is not allowed: use a token id >= 0"),
        ("no_match_guess", True, r"rest.no_match_guess=True is not allowed"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(key, value, message):
    with pytest.raises(DecodingConfigError, match=message):
        RestSettings(**{key: value})


def test_no_datastore_is_refused_with_how_to_build_one(model, tmp_path):
    with pytest.raises(DatastoreError, match="rest.datastore is not set: build one with python -m lade_bench"):
        rest_generate(model, [1, 2], 4)
    with pytest.raises(DatastoreError, match="no REST datastore at .*missing; build one with"):
        rest_generate(model, [1, 2], 4, RestSettings(datastore=str(tmp_path / "missing")))


@pytest.mark.slow
def test_sampling_matches_the_exact_distribution(setting, tmp_path):  # noqa: F811 (the shared fixture)
    """Sampled continuations follow AR sampling's exact distribution (the enumeration of
    test_sampling_distribution.py), with trees retrieved from a datastore holding every short
    continuation of the prompt's end about as often as the model samples it, so most steps verify
    branching trees whose likely branches get accepted."""
    model, prompt, sequences, exact = setting
    documents = [prompt[-2:] + list(s) for s, p in zip(sequences, exact, strict=True) for _ in range(1 + int(p * 500))]
    store = RestState(_store(tmp_path, documents, vocab=VOCAB))
    # A miss drafts a guess inside the 8-token vocabulary (the authors' 100 is past it).
    guess = RestSettings(datastore=None, no_match_guess=VOCAB - 1)
    draws, multi_token_steps = [], 0
    for seed in range(800):
        result = rest_generate(model, prompt, LENGTH, guess, state=store, sampling=SAMPLING, seed=seed)
        draws.append(tuple(result.tokens))
        multi_token_steps += sum(n > 1 for n in result.accept_lengths)
    assert multi_token_steps > 100  # drafts were accepted, not only rejected
    assert goodness_of_fit(draws, sequences, exact) > ALPHA


def test_bench_names_the_datastore_by_a_setting(model, tmp_path):
    """``python -m lade_bench.bench --setting rest.datastore=PATH``: the bench's arms read it."""
    import argparse

    from lade_bench.bench import build_arms, parse_setting

    assert parse_setting("rest.num_draft=8") == ("rest", "num_draft", 8)
    with pytest.raises(argparse.ArgumentTypeError, match="'rest=3': use SECTION.KEY=VALUE"):
        parse_setting("rest=3")
    prompt = [5, 6, 7, 8, 9, 10] * 4
    reference = autoregressive_generate(model, prompt, 16).tokens
    store = write_datastore(tmp_path / "ds", [prompt[-4:] + reference], tokenizer="embedded:smollm2", vocab_size=128)
    arms = build_arms(model, None, 16, [], ["rest"], settings={"rest": {"datastore": str(store)}})
    result = arms["rest"](prompt)
    assert result.tokens == reference and result.steps < len(reference)
