"""PIA (Ant's trie lookahead): what goes into the trie and when, how a draft is read off it, eviction,
warm state, sampling and refusals. Exactness on every architecture is the registry-wide grid's
(tests/decoding/test_method_exactness.py)."""

from __future__ import annotations

import pytest

from lade_bench.decoding import DecodingConfigError
from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.drafters.pia import (
    PIA_BRANCH_LENGTH,
    PIA_DECODING_LENGTH,
    PIA_MAX_NODES,
    PIA_MAX_OUTPUT_NODES,
    PIA_MAX_QUERY_LENGTH,
    PIA_SQUEEZE_AFTER_TREES,
    PiaSettings,
    PiaState,
    pia_generate,
)
from lade_bench.methods.registry import configuration_label
from lade_bench.models.tiny import tiny_model
from lade_bench.results import load_rows
from lade_bench.runner import plan_cell, register_configs, run_cell
from lade_bench.runner.rows import decode_step_means

from ..runner.conftest import CONF_DIR, TINY
from .helpers import ForwardCounter
from .refused_models import POSITION_BIASED
from .test_sampling_distribution import ALPHA, LENGTH, SAMPLING, goodness_of_fit, setting  # noqa: F401 (fixture)

BOS = 99  # the prompt's first token, which the authors leave out of the trie


def _draft(
    state: PiaState, context: list[int], decoding_length: int = 64, branch_length: int = 3, earlier_prompts: bool = True
):
    tokens, parents = state.draft(context, decoding_length, branch_length, 2, earlier_prompts)
    assert tokens[0] == context[-1] and parents[0] == -1
    return tokens[1:], parents[1:]


def test_the_defaults_are_the_authors():
    assert (PIA_DECODING_LENGTH, PIA_BRANCH_LENGTH, PIA_MAX_QUERY_LENGTH) == (64, 12, 2)
    assert (PIA_MAX_NODES, PIA_MAX_OUTPUT_NODES, PIA_SQUEEZE_AFTER_TREES) == (65536, 512, 1024)


def test_branches_sharing_a_prefix_are_merged_into_one_tree():
    state = PiaState(branch_length=3)
    state.put_prompt([BOS, 1, 2, 3, 4, 1, 2, 5, 6])
    # The tree of 1 walked by 2: two continuations, 3 4 1 and 5 6, under the shared "1 2".
    assert _draft(state, [1, 2]) == ([3, 4, 1, 5, 6], [0, 1, 2, 0, 4])
    # No tree for 7: the shorter query, the tree of 2 alone, whose n-grams are cut at branch_length.
    assert _draft(state, [7, 2]) == ([3, 4, 1, 5, 6], [0, 1, 2, 0, 4])
    assert _draft(state, [7, 8]) == ([], [])  # nothing known: cur alone


def test_the_more_frequent_continuation_comes_first_and_the_size_is_capped():
    state = PiaState(branch_length=3)
    state.put_prompt([BOS, 1, 2, 3, 1, 2, 5, 1, 2, 5, 8])
    tokens, parents = _draft(state, [1, 2])
    assert tokens == [5, 1, 2, 8, 3, 1, 2] and parents == [0, 1, 2, 1, 0, 5, 6]
    assert _draft(state, [1, 2], decoding_length=4) == ([5, 1, 2], [0, 1, 2])  # 4 nodes with cur
    assert _draft(state, [1, 2], branch_length=1) == ([5, 3], [0, 0])  # depth 1


def test_the_prompt_counts_for_its_own_request_and_the_output_for_later_ones():
    state = PiaState(branch_length=3)
    state.put_prompt([BOS, 1, 2, 3, 4])
    assert _draft(state, [1, 2])[0] == [3, 4]
    state.stream_output([1, 2, 7])
    assert _draft(state, [1, 2])[0] == [3, 4]  # the output's window of 4 is not full yet
    state.stream_output([8, 9])  # now "1 2 7 8 9": the n-gram after 1 is complete
    assert _draft(state, [1, 2])[0] == [3, 4, 7, 8, 9]  # the prompt's first (input frequency first)
    state.finish([6])  # the request ends: its last n-grams go in, its prompt's counts are reset
    # The prompt's n-grams, at zero now, come after the counted ones (the authors' _ravel), or not at all.
    assert _draft(state, [1, 2])[0] == [7, 8, 9, 3, 4]
    assert _draft(state, [1, 2], earlier_prompts=False)[0] == [7, 8, 9]
    assert _draft(state, [3, 4])[0] == []  # a walk never goes through a node at zero (their _match)
    assert _draft(state, [9, 6])[0] == []  # 6 ended the output: nothing follows it
    state.put_prompt([BOS])
    state.finish([50, 51, 52, 53, 54], stop_ids=[53])  # a stop id cuts the output before it goes in
    assert _draft(state, [50, 51])[0] == [52]


def _finish_output(state: PiaState, output: list[int]) -> None:
    state.put_prompt([BOS])
    state.finish(output)


def test_a_tree_over_its_bounds_drops_rare_nodes_and_halves_the_others_once_enough_trees_changed():
    output = [1, 2, 3, 9, 1, 2, 4, 9, 1, 5]  # after 1: "2" twice, "5" once
    lazy = PiaState(branch_length=2, max_output_nodes=2, squeeze_after_trees=100)
    _finish_output(lazy, output)
    assert _draft(lazy, [7, 1], branch_length=2) == ([2, 3, 4, 5], [0, 1, 1, 0])  # 100 trees not reached
    eager = PiaState(branch_length=2, max_output_nodes=2, squeeze_after_trees=1)
    _finish_output(eager, output)
    assert _draft(eager, [7, 1], branch_length=2) == ([2], [0])
    assert eager.size() < lazy.size()
    # The survivor's count was halved to 1: one more squeeze (the tree still over its bound) drops it.
    _finish_output(eager, [1, 6, 8, 1, 6, 8, 1, 7])
    assert _draft(eager, [7, 1], branch_length=2)[0] == [6, 8]


def test_a_subtree_larger_than_the_draft_drafts_its_most_frequent_output_nodes_only():
    state = PiaState(branch_length=1)
    _finish_output(state, [1, 20, 7, 1, 20, 7, 1, 21, 7])  # earlier outputs: 1 20 twice, 1 21 once
    state.put_prompt([BOS, 1, 10, 5, 1, 11, 5, 1, 12, 5])  # this prompt: 1 10, 1 11, 1 12
    # Ten live nodes below 1: with 64 draft nodes the prompt's come first (mixed frequency) ...
    tokens, _ = _draft(state, [8, 1], decoding_length=64, branch_length=2)
    assert tokens == [10, 5, 11, 5, 12, 5, 20, 7, 21, 7]
    # ... with 4, only nodes as frequent in outputs as the 4 // 2 = 2nd most frequent (the authors' rule).
    assert _draft(state, [8, 1], decoding_length=4, branch_length=2) == ([20, 7], [0, 1])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("decoding_length", 1, "pia.decoding_length=1 is not allowed: use an integer >= 2"),
        ("branch_length", 0, "pia.branch_length=0 is not allowed: use an integer >= 1"),
        ("max_query_length", 1.5, "pia.max_query_length=1.5 is not allowed: use an integer >= 1"),
        ("max_output_nodes", True, "pia.max_output_nodes=True is not allowed: use an integer >= 1"),
        ("draft_earlier_prompts", "yes", "pia.draft_earlier_prompts='yes' is not allowed: use true or false"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(key, value, message):
    with pytest.raises(DecodingConfigError, match=message):
        PiaSettings(**{key: value})


def _cell_config(*overrides: str):
    from hydra import compose, initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[*TINY, "arms=[ar,pia]", *overrides])


def test_the_plan_refuses_a_bad_setting_before_loading_and_a_state_serves_its_own_settings():
    cfg = _cell_config("pia.decoding_length=1")
    with pytest.raises(ValueError, match="pia.decoding_length=1 is not allowed: use an integer >= 2"):
        plan_cell(cfg)
    with pytest.raises(DecodingConfigError, match=r"\(12, 65536, 512, 1024\) cannot run \(6, 65536, 512, 1024\)"):
        pia_generate(None, [1, 2], 4, PiaSettings(branch_length=6), state=PiaState())


def test_a_model_lookahead_refuses_is_refused_before_any_forward():
    from transformers import AutoModelForCausalLM

    from lade_bench.decoding.core.checks import UnsupportedModelError

    alibi = AutoModelForCausalLM.from_config(POSITION_BIASED["mpt"](), attn_implementation="eager").eval()
    counter = ForwardCounter(alibi)
    with pytest.raises(UnsupportedModelError, match="ALiBi"):
        pia_generate(alibi, [1, 2, 3, 1, 2, 3], 8)
    assert counter.calls == 0


@pytest.fixture(scope="module")
def model():
    """A tiny float64 Llama whose peaked outputs repeat (so drafts are accepted)."""
    return tiny_model("llama", init_scale=3.0)


def test_generation_matches_ar_accepts_drafts_and_a_warm_trie_accepts_more_on_a_repeated_request(model):
    prompt = [11, 3, 17, 40, 2, 9, 33, 21]
    reference = autoregressive_generate(model, prompt, 32).tokens
    state = PiaState()
    first = pia_generate(model, prompt, 32, state=state)
    size = state.size()
    again = pia_generate(model, prompt, 32, state=state)
    assert first.tokens == reference and again.tokens == reference
    assert size > 0 and state.size() >= size
    assert max(first.accept_lengths[1:]) > 1  # drafts accepted in a cold request (its own output repeats)
    # The second request finds the first one's output n-grams in the trie.
    assert again.steps < first.steps
    assert decode_step_means(again)["mean_accepted"] > decode_step_means(first)["mean_accepted"]
    for result in (first, again):
        assert result.method == "pia"
        assert max(result.step_tokens or [0]) <= PIA_DECODING_LENGTH
        assert len(result.accept_lengths) == result.steps and sum(result.accept_lengths) == len(result.tokens)


def test_a_stop_id_ends_the_generation_and_a_budget_of_one_is_the_prefill(model):
    prompt = [11, 3, 17, 40, 2, 9, 33, 21]
    reference = autoregressive_generate(model, prompt, 32).tokens
    stop = reference[5]
    result = pia_generate(model, prompt, 32, eos_token_id=stop)
    assert result.tokens == reference[: reference.index(stop) + 1]
    single = pia_generate(model, prompt, 1)
    assert single.tokens == reference[:1] and single.steps == 1


def test_a_cell_carries_the_trie_across_its_requests_and_its_section_enters_the_cell_id(tmp_path):
    outcome = run_cell(_cell_config("warmup=0", f"output_root={tmp_path}"))
    rows = load_rows(outcome.cell_dir)
    pia = rows[rows["arm"] == "pia"].sort_values("turn")
    assert rows["error"].isna().all() and pia["matches_ar"].all()
    assert pia["state_requests_seen"].tolist() == list(range(len(pia))) and len(pia) >= 2  # MT-Bench: 2 turns
    assert pia["state_size"].iloc[0] == 0 and pia["state_size"].iloc[-1] > 0
    assert (pia["mean_draft_width"] >= 1.0).all()
    default_id = plan_cell(_cell_config(f"output_root={tmp_path}")).cell_id
    assert plan_cell(_cell_config(f"output_root={tmp_path}", "pia.decoding_length=32")).cell_id != default_id


@pytest.mark.slow
def test_sampling_matches_the_exact_distribution(setting):  # noqa: F811 (the shared fixture)
    """Sampled continuations follow AR sampling's exact distribution (the enumeration of
    test_sampling_distribution.py), with trees drafted from a warm trie of earlier sampled outputs."""
    model, prompt, sequences, exact = setting
    state = PiaState(branch_length=2)
    draws, multi_token_steps = [], 0
    for seed in range(600):
        result = pia_generate(
            model, prompt, LENGTH, PiaSettings(branch_length=2), state=state, sampling=SAMPLING, seed=seed
        )
        draws.append(tuple(result.tokens))
        multi_token_steps += sum(n > 1 for n in result.accept_lengths)
    assert multi_token_steps > 100  # drafts were accepted, not only rejected
    assert goodness_of_fit(draws, sequences, exact) > ALPHA


def test_the_label_is_plain_at_the_authors_rule_and_names_our_earlier_one():
    """Cells recorded before ``draft_earlier_prompts`` existed (the committed Spec-Bench ones) ran our rule."""
    committed = {"decoding_length": 64, "branch_length": 12, "max_query_length": 2, "max_nodes": 65536}
    assert configuration_label("pia", {**committed, "draft_earlier_prompts": True}) == "PIA (Ant trie lookahead)"
    ours = "PIA (Ant trie lookahead, earlier prompts not drafted)"
    assert configuration_label("pia", {**committed, "draft_earlier_prompts": False}) == ours
    assert configuration_label("pia", committed) == ours
    assert PiaSettings().draft_earlier_prompts is True  # the authors' rule is the default
