"""The draft-tree seam: tree validation, greedy tree verification, and exact generation with any drafter."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lade_bench.decoding import DecodingConfigError, autoregressive_generate
from lade_bench.decoding.drafters.draft_tree import (
    DraftTree,
    TreeRequest,
    TreeStep,
    draft_reach,
    draft_tree_generate,
    tree_of_candidates,
    verify_tree_greedy,
)
from lade_bench.models.tiny import tiny_model
from lade_bench.runner.rows import decode_step_means

PROMPT = [5, 6, 7, 8, 9, 5, 6, 7, 8, 3, 4]


# --- verify_tree_greedy on hand-built trees ---------------------------------------------------------


def test_longest_matching_path_wins_and_emits_the_bonus_token():
    # root 10 -> a(11) -> b(12); root -> c(11) -> d(12) -> e(13). Greedy chain: 11, 12, 13, 14.
    tree = DraftTree((10, 11, 12, 11, 12, 13), (-1, 0, 1, 0, 3, 4))
    predictions = [11, 12, 50, 12, 13, 14]
    accepted, path = verify_tree_greedy(predictions, tree)
    assert path == [3, 4, 5]
    assert accepted == [11, 12, 13, 14]


def test_ties_go_to_the_earliest_node():
    tree = DraftTree((10, 11, 11), (-1, 0, 0))
    accepted, path = verify_tree_greedy([11, 20, 21], tree)
    assert path == [1]
    assert accepted == [11, 20]  # the bonus token is the winner's own row's argmax


def test_a_node_is_accepted_only_when_its_parent_predicts_it():
    # Node 2 (token 12) would match the root's successor's prediction, but its parent is the root.
    tree = DraftTree((10, 11, 12), (-1, 0, 0))
    accepted, path = verify_tree_greedy([11, 12, 99], tree)
    assert path == [1]
    assert accepted == [11, 12]


def test_no_match_emits_only_the_roots_argmax():
    tree = DraftTree.from_chain(10, [1, 2, 3])
    accepted, path = verify_tree_greedy([7, 8, 9, 4], tree)
    assert (accepted, path) == ([7], [])


def test_a_chain_is_a_tree_with_one_branch():
    tree = DraftTree.from_chain(3, [4, 5, 6])
    assert tree.parents == (-1, 0, 1, 2) and tree.is_chain() and tree.depths() == (0, 1, 2, 3)
    accepted, path = verify_tree_greedy([4, 5, 6, 77], tree)
    assert (accepted, path) == ([4, 5, 6, 77], [1, 2, 3])
    accepted, path = verify_tree_greedy([4, 5, 9, 77], tree)
    assert (accepted, path) == ([4, 5, 9], [1, 2])


def test_candidates_become_flat_chains_or_a_trie():
    flat, flat_paths = tree_of_candidates(1, [(2, 3), (2, 4)], "flat")
    assert flat.tokens == (1, 2, 3, 2, 4) and flat.parents == (-1, 0, 1, 0, 3)
    assert flat_paths == ((1, 2), (3, 4))
    trie, trie_paths = tree_of_candidates(1, [(2, 3), (2, 4)], "trie")
    assert trie.tokens == (1, 2, 3, 4) and trie.parents == (-1, 0, 1, 1)
    assert trie_paths == ((1, 2), (1, 3))
    with pytest.raises(DecodingConfigError, match="'bush'.*flat"):
        tree_of_candidates(1, [(2,)], "bush")


@pytest.mark.parametrize(
    ("tokens", "parents", "message"),
    [
        ((), (), "at least its root"),
        ((1, 2), (-1,), "one parent per token"),
        ((1, 2), (0, 0), "node 0 is the root"),
        ((1, 2, 3), (-1, 2, 0), "node 1's parent is 2; allowed: an earlier node, 0..0"),
        ((1, 2), (-1, -1), "node 1's parent is -1"),
        ((1, -3), (-1, 0), "node 1's token is -3"),
    ],
)
def test_malformed_trees_are_refused_naming_the_bad_node(tokens, parents, message):
    with pytest.raises(DecodingConfigError, match=message):
        DraftTree(tokens, parents)


@st.composite
def trees_and_predictions(draw):
    """A random tree over a 4-token vocabulary (so paths match often) and random argmaxes."""
    size = draw(st.integers(1, 12))
    parents = [-1] + [draw(st.integers(0, node - 1)) for node in range(1, size)]
    tokens = [draw(st.integers(0, 3)) for _ in range(size)]
    predictions = [draw(st.integers(0, 3)) for _ in range(size)]
    return DraftTree(tuple(tokens), tuple(parents)), predictions


@settings(max_examples=200, deadline=None)
@given(trees_and_predictions())
def test_verification_picks_the_earliest_longest_matching_path(case):
    """Against brute force: every root-to-node path checked on its own."""
    tree, predictions = case
    paths = [tree.path_to(node) for node in range(tree.size)]
    matching = [
        (len(path), node)
        for node, path in enumerate(paths)
        if all(tree.tokens[n] == predictions[tree.parents[n]] for n in path)
    ]
    length, end = max(matching, key=lambda m: (m[0], -m[1]))
    accepted, path = verify_tree_greedy(predictions, tree)
    assert path == tree.path_to(end) and len(path) == length
    # The accepted tokens are the greedy chain: each one the argmax after the previous.
    assert accepted == [predictions[0], *(predictions[n] for n in path)]
    assert accepted[:-1] == [tree.tokens[n] for n in path]


# --- exact generation with different drafters ---------------------------------------------------------


class RandomTrees:
    """Random trees (seeded), with tokens drawn near the true continuation now and then so some match."""

    def __init__(self, seed: int, reference: list[int], prompt_length: int) -> None:
        self.rng = random.Random(seed)
        self.reference = reference
        self.prompt_length = prompt_length
        self.steps: list[TreeStep] = []

    def propose(self, context):
        done = len(context) - self.prompt_length
        tokens, parents = [context[-1]], [-1]
        for node in range(1, self.rng.randint(1, 10)):
            parent = self.rng.randrange(node)
            depth = self._depth(parents, parent)
            truth = self.reference[done + depth] if done + depth < len(self.reference) else 0
            tokens.append(truth if self.rng.random() < 0.6 else self.rng.randrange(128))
            parents.append(parent)
        return DraftTree(tuple(tokens), tuple(parents))

    @staticmethod
    def _depth(parents, node):
        depth = 0
        while node > 0:
            node, depth = parents[node], depth + 1
        return depth

    def observe(self, step):
        self.steps.append(step)


class TrueChain:
    """The true continuation as a chain of ``length`` tokens: every draft token is accepted."""

    def __init__(self, reference: list[int], prompt_length: int, length: int) -> None:
        self.reference, self.prompt_length, self.length = reference, prompt_length, length

    def propose(self, context):
        done = len(context) - self.prompt_length
        return DraftTree.from_chain(context[-1], self.reference[done : done + self.length])

    def observe(self, step):
        pass


class AlwaysWrong:
    """Three chains of tokens that never follow (the reference's next token plus one)."""

    def __init__(self, reference: list[int], prompt_length: int) -> None:
        self.reference, self.prompt_length = reference, prompt_length

    def propose(self, context):
        done = len(context) - self.prompt_length
        wrong = (self.reference[done] + 1) % 128 if done < len(self.reference) else 0
        return DraftTree.from_candidates(context[-1], [(wrong, 1), (wrong, 2), (wrong, 3)], "flat")

    def observe(self, step):
        pass


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama", init_scale=3.0, seed=7)


@pytest.fixture(scope="module")
def reference(llama):
    return autoregressive_generate(llama, PROMPT, 24).tokens


def test_random_trees_decode_exactly_and_keep_only_the_accepted_path(llama, reference):
    drafter = RandomTrees(0, reference, len(PROMPT))
    result = draft_tree_generate(llama, PROMPT, drafter, 24)
    assert result.tokens == reference
    assert sum(result.accept_lengths) == 24 and result.steps == len(result.accept_lengths)
    assert result.step_tokens == [len(PROMPT), *(step.tree.size for step in drafter.steps)]
    assert max(result.accept_lengths) > 1, "no draft token was ever accepted: the test would prove little"
    for step in drafter.steps:
        assert step.logits.shape == (step.tree.size, 128)
        assert len(step.path) == len(step.accepted) - 1
    # Each step starts where the previous one's accepted tokens end: the cache kept exactly those.
    positions = [step.position for step in drafter.steps]
    assert positions == [len(PROMPT) + sum(result.accept_lengths[: i + 1]) - 1 for i in range(len(positions))]
    sizes = [step.tree.size for step in drafter.steps]
    assert decode_step_means(result)["mean_draft_width"] == pytest.approx(sum(sizes) / len(sizes))
    assert result.forward_time_s <= result.wall_time_s


def test_a_true_chain_is_accepted_in_full(llama, reference):
    result = draft_tree_generate(llama, PROMPT, TrueChain(reference, len(PROMPT), 4), 24)
    assert result.tokens == reference
    # Prefill 1 token, then 5 per step (4 drafts + bonus): 1 + 4*5 = 21, then the budget's last 3.
    assert result.accept_lengths == [1, 5, 5, 5, 5, 3]
    assert decode_step_means(result)["mean_accepted"] == pytest.approx(23 / 5)


def test_an_always_wrong_drafter_decodes_one_token_per_step(llama, reference):
    result = draft_tree_generate(llama, PROMPT, AlwaysWrong(reference, len(PROMPT)), 24)
    assert result.tokens == reference
    assert result.accept_lengths == [1] * 24
    assert result.step_tokens[1:] == [7] * 23


def test_stop_ids_and_a_budget_of_one(llama, reference):
    stop = reference[7]
    expected = reference[: reference.index(stop) + 1]
    result = draft_tree_generate(llama, PROMPT, TrueChain(reference, len(PROMPT), 4), 24, eos_token_id=stop)
    assert result.tokens == expected
    single = draft_tree_generate(llama, PROMPT, TrueChain(reference, len(PROMPT), 4), 1)
    assert single.tokens == reference[:1] and single.steps == 1


def test_sliding_window_model_with_random_trees():
    model = tiny_model("gemma2", init_scale=3.0, seed=7)
    prompt = PROMPT * 3  # longer than the tiny gemma2's window, so the sliding mask restricts
    reference = autoregressive_generate(model, prompt, 16).tokens
    result = draft_tree_generate(model, prompt, RandomTrees(1, reference, len(prompt)), 16)
    assert result.tokens == reference


def test_chains_in_order_run_under_the_models_own_mask(llama, reference):
    reach = draft_reach("a true chain", depth=4, size=5, chains_only=True)
    result = draft_tree_generate(llama, PROMPT, TrueChain(reference, len(PROMPT), 4), 24, reach=reach)
    assert result.tokens == reference and result.accept_lengths == [1, 5, 5, 5, 5, 3]


def test_a_tree_beyond_the_declared_reach_or_off_cur_is_refused(llama, reference):
    reach = draft_reach("a true chain", depth=3, size=4)
    with pytest.raises(DecodingConfigError, match="depth 4 and 5 nodes.*depth <= 3"):
        draft_tree_generate(llama, PROMPT, TrueChain(reference, len(PROMPT), 4), 8, reach=reach)

    class OffRoot(TrueChain):
        def propose(self, context):
            return DraftTree.from_chain(context[-1] + 1, [])

    with pytest.raises(DecodingConfigError, match="rooted at cur"):
        draft_tree_generate(llama, PROMPT, OffRoot(reference, len(PROMPT), 1), 8)


def test_a_tree_request_closes_with_its_output_and_with_the_prompt_alone_when_it_fails(llama, reference):
    closed: list[list[int]] = []
    request = TreeRequest(llama, PROMPT, 24)
    result = request.run(TrueChain(reference, len(PROMPT), 4), "chain", draft_reach("chain", 4, 5), close=closed.append)
    assert result.tokens == reference and result.method == "chain"
    assert closed == [PROMPT + reference]
    with pytest.raises(DecodingConfigError, match="depth <= 3"):  # the first decode step's tree is too deep
        request.run(TrueChain(reference, len(PROMPT), 4), "chain", draft_reach("chain", 3, 4), close=closed.append)
    assert closed[1:] == [PROMPT]  # a failed request is still closed, with no output


def test_prefill_observer_sees_every_prompt_row(llama, reference):
    seen = []
    result = draft_tree_generate(llama, PROMPT, AlwaysWrong(reference, len(PROMPT)), 3, prefill_observer=seen.append)
    assert result.tokens == reference[:3]
    assert seen[0].shape == (len(PROMPT), 128)
    assert int(seen[0][-1].argmax()) == reference[0]


def test_sampling_emits_what_the_tree_verified(llama):
    from lade_bench.decoding import SamplingParams

    sampling = SamplingParams(do_sample=True, temperature=0.7)
    drafter = RandomTrees(2, [0] * 32, len(PROMPT))
    result = draft_tree_generate(llama, PROMPT, drafter, 16, sampling=sampling, seed=3)
    assert result.method == "draft_tree_sampling" and len(result.tokens) == 16
    for step in drafter.steps:
        # Every accepted token but the last is the token of the path's node, the last one's child.
        assert step.accepted[:-1] == [step.tree.tokens[n] for n in step.path]
    again = draft_tree_generate(llama, PROMPT, RandomTrees(2, [0] * 32, len(PROMPT)), 16, sampling=sampling, seed=3)
    assert again.tokens == result.tokens
    torch.testing.assert_close(torch.tensor(again.accept_lengths), torch.tensor(result.accept_lengths))


# --- prompt lookup on the seam: transformers' candidates, transformers' forwards ------------------------


def _transformers_prompt_lookup(model, prompt, budget, num_tokens, stop_ids):
    """Tokens and forward count of ``generate(prompt_lookup_num_tokens=...)`` (transformers' own loop)."""
    from transformers import GenerationConfig

    from .helpers import ForwardCounter

    config = GenerationConfig(
        max_new_tokens=budget,
        do_sample=False,
        prompt_lookup_num_tokens=num_tokens,
        max_matching_ngram_size=2,
        eos_token_id=stop_ids,
        pad_token_id=0,
    )
    counter = ForwardCounter(model)
    prompt_tensor = torch.tensor([prompt])
    try:
        output = model.generate(prompt_tensor, attention_mask=torch.ones_like(prompt_tensor), generation_config=config)
    finally:
        counter.remove()
    return output[0, len(prompt) :].tolist(), counter.calls


@pytest.mark.parametrize("seed", [0, 1])
def test_prompt_lookup_takes_transformers_candidates_and_forwards(llama, seed):
    from lade_bench.decoding import prompt_lookup_generate
    from lade_bench.decoding.drafters.prompt_lookup import PromptLookupSettings

    from .helpers import repetitive_prompt

    prompt = repetitive_prompt(40, seed)
    reference = autoregressive_generate(llama, prompt, 40).tokens
    # The stop id first emitted latest in the output (so steps with accepted candidates come before it).
    stop = max(set(reference), key=reference.index)
    runs = []
    for stop_ids in ([], [stop]):
        tokens, forwards = _transformers_prompt_lookup(llama, prompt, 40, 4, stop_ids)
        ours = prompt_lookup_generate(llama, prompt, 40, PromptLookupSettings(4, 2), eos_token_id=stop_ids)
        assert ours.tokens == tokens == reference[: len(tokens)]
        assert ours.steps == forwards
        assert ours.method == "prompt_lookup" and ours.forward_time_s <= ours.wall_time_s
        runs.append(ours)
    assert runs[1].tokens == reference[: reference.index(stop) + 1]
    assert max(runs[0].accept_lengths) > 2, "no candidate was accepted: the step counts would prove little"
