"""The verification branch as flat chains or a token trie: structure, layout, and identical acceptance.

The acceptance tests use an *oracle* language model, a fixed function from a context (the tokens
after cur's predecessor, i.e. a candidate prefix) to a next token or a distribution. A correct
layout gives every candidate token's row that token's context, so reading the oracle at each row's
context is exactly what the real forward computes; verification must then accept the same tokens
(and, sampling, draw the same ones for the same seed) whichever layout fed the candidates.
"""

from __future__ import annotations

import hashlib

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lade_bench.decoding.core.branch import BRANCH_BUILDERS, flat_branch, trie_branch
from lade_bench.decoding.core.layout import LayoutCache, build_branch_layout, build_step_layout
from lade_bench.decoding.core.params import VERIFICATION_LAYOUTS
from lade_bench.decoding.core.verify import verify_greedy, verify_sampling

VOCAB = 4  # few tokens, so candidates share prefixes and the oracle's chain often matches them


@st.composite
def candidate_sets(draw, max_length: int = 5, max_count: int = 12) -> list[tuple[int, ...]]:
    """Distinct candidates of one length over a small vocabulary (as the pool returns them)."""
    length = draw(st.integers(1, max_length))
    token = st.integers(0, VOCAB - 1)
    items = st.tuples(*[token] * length)
    return draw(st.lists(items, min_size=0, max_size=max_count, unique=True))


def test_branch_builders_cover_every_layout():
    assert set(BRANCH_BUILDERS) == set(VERIFICATION_LAYOUTS)


def test_flat_branch_feeds_each_candidate_as_its_own_chain():
    branch = flat_branch([(1, 2), (1, 3)])
    assert branch.tokens == [1, 2, 1, 3]
    assert branch.paths == ((0, 1), (2, 3))


def test_trie_feeds_shared_prefixes_once_in_first_appearance_order():
    branch = trie_branch([(1, 2, 3), (7, 8, 9), (1, 2, 4), (1, 5, 6)])
    # Nodes in order of first appearance: 1 2 3 | 7 8 9 | 4 (after 1 2) | 5 6 (after 1).
    assert branch.tokens == [1, 2, 3, 7, 8, 9, 4, 5, 6]
    assert branch.paths == ((0, 1, 2), (3, 4, 5), (0, 1, 6), (0, 7, 8))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(candidates=candidate_sets())
def test_trie_is_the_minimal_prefix_tree(candidates):
    branch = trie_branch(candidates)
    for candidate, path in zip(candidates, branch.paths, strict=True):
        assert [branch.tokens[node] for node in path] == list(candidate)
        assert list(path) == sorted(path)  # a node comes after its parent
    # One node per distinct non-empty prefix: shared prefixes fed once, nothing else merged.
    prefixes = {tuple(c[: d + 1]) for c in candidates for d in range(len(c))}
    assert len(branch.tokens) == len(prefixes) <= len(flat_branch(candidates).tokens)
    # Children of a node appear in the order of the candidates that introduced them.
    first_seen: dict[tuple[int, ...], int] = {}
    for i, c in enumerate(candidates):
        for d in range(len(c)):
            first_seen.setdefault(tuple(c[: d + 1]), i)
    node_of_prefix = {
        tuple(c[: d + 1]): p[d] for c, p in zip(candidates, branch.paths, strict=True) for d in range(len(c))
    }
    siblings: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for prefix in prefixes:
        siblings.setdefault(prefix[:-1], []).append(prefix)
    for group in siblings.values():
        by_node = sorted(group, key=node_of_prefix.__getitem__)
        assert [first_seen[p] for p in by_node] == sorted(first_seen[p] for p in by_node)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(candidates=candidate_sets(), levels=st.integers(1, 4), columns=st.integers(1, 5))
def test_trie_layout_is_the_ancestor_rule(candidates, levels, columns):
    branch = trie_branch(candidates)
    layout = build_branch_layout(levels, columns, branch.tree.parents, branch.paths, torch.float32, "cpu")
    flat = build_step_layout(
        levels, columns, len(candidates), len(candidates[0]) if candidates else 1, torch.float32, "cpu"
    )
    window = levels * columns
    size = len(branch.tokens)
    assert layout.num_tokens == window + size <= flat.num_tokens
    allowed = layout.mask_block == 0
    # The window part is the flat layout's, and neither part sees the other.
    assert torch.equal(allowed[:window, :window], (flat.mask_block == 0)[:window, :window])
    assert not allowed[:window, window:].any() and not allowed[window:, 1:window].any()
    # A branch token sees cur and exactly its ancestors and itself; its position is its depth.
    ancestors = [set() for _ in range(size)]
    depth = [0] * size
    for path in branch.paths:
        for d, node in enumerate(path):
            ancestors[node] = set(path[: d + 1])
            depth[node] = d + 1
    for node in range(size):
        row = allowed[window + node]
        assert row[0]
        assert {j for j in range(size) if row[window + j]} == ancestors[node]
    assert layout.position_offsets[window:].tolist() == depth
    # Candidate rows point at the logit rows of the candidate's nodes (shared nodes, shared rows).
    logit_rows = layout.logit_rows.tolist()
    for path, rows in zip(branch.paths, layout.candidate_rows, strict=True):
        assert [logit_rows[r] for r in rows] == [window + node for node in path]


def _oracle_logits(context: tuple[int, ...]) -> torch.Tensor:
    """A fixed pseudo-random 'model': logits over VOCAB tokens after ``context``."""
    digest = hashlib.sha256(repr(context).encode()).digest()
    return torch.tensor([digest[i] / 32.0 for i in range(VOCAB)], dtype=torch.float64)


def _oracle_next(context: tuple[int, ...]) -> int:
    return int(_oracle_logits(context).argmax())


def _row_contexts(layout, candidates) -> dict[int, tuple[int, ...]]:
    """Logit row -> the context its token was given (row 0: cur's, the empty candidate prefix)."""
    contexts: dict[int, tuple[int, ...]] = {0: ()}
    for candidate, rows in zip(candidates, layout.candidate_rows, strict=True):
        for t, row in enumerate(rows):
            assert contexts.setdefault(row, tuple(candidate[: t + 1])) == tuple(candidate[: t + 1])
    return contexts


def _layout_of(layout_name: str, candidates):
    branch = BRANCH_BUILDERS[layout_name](candidates)
    return build_branch_layout(2, 3, branch.tree.parents, branch.paths, torch.float32, "cpu")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(candidates=candidate_sets())
def test_greedy_walk_accepts_the_same_on_the_trie(candidates):
    outcomes = {}
    for name in VERIFICATION_LAYOUTS:
        layout = _layout_of(name, candidates)
        contexts = _row_contexts(layout, candidates)
        predictions = [0] * int(layout.logit_rows.numel())
        for row, context in contexts.items():
            predictions[row] = _oracle_next(context)
        outcomes[name] = verify_greedy(predictions, candidates, layout.candidate_rows)
    assert outcomes["trie"] == outcomes["flat"]
    # And both are the longest candidate prefix on the oracle's greedy chain (earliest on a tie).
    chain = [_oracle_next(())]
    for _ in range(len(candidates[0]) if candidates else 0):
        chain.append(_oracle_next(tuple(chain)))
    best, winner = 0, -1
    for i, candidate in enumerate(candidates):
        matched = next((t for t, token in enumerate(candidate) if token != chain[t]), len(candidate))
        if matched > best:
            best, winner = matched, i
    assert outcomes["flat"] == (chain[: best + 1], winner, best)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(candidates=candidate_sets(), seed=st.integers(0, 2**31 - 1), temperature=st.sampled_from([0.3, 1.0, 3.0]))
def test_sampling_draws_the_same_on_the_trie_for_the_same_seed(candidates, seed, temperature):
    outcomes = {}
    for name in VERIFICATION_LAYOUTS:
        layout = _layout_of(name, candidates)
        contexts = _row_contexts(layout, candidates)

        def probabilities_of_row(row: int, contexts=contexts) -> torch.Tensor:
            return torch.softmax(_oracle_logits(contexts[row]) / temperature, dim=-1)

        generator = torch.Generator().manual_seed(seed)
        outcomes[name] = verify_sampling(probabilities_of_row, candidates, layout.candidate_rows, generator)
    assert outcomes["trie"] == outcomes["flat"]


def test_layout_cache_reuses_a_structure_whatever_its_tokens():
    cache = LayoutCache(torch.float32, "cpu", capacity=2)
    first = cache.get(2, 3, trie_branch([(1, 2), (1, 3)]))
    same_shape = cache.get(2, 3, trie_branch([(5, 6), (5, 7)]))
    assert same_shape is first
    other = cache.get(2, 3, trie_branch([(1, 2), (4, 3)]))
    assert other is not first and other.num_tokens == first.num_tokens + 1
    cache.get(2, 3, flat_branch([(1, 2)]))  # a third structure: the least recently used goes
    assert cache.get(2, 3, trie_branch([(8, 8), (8, 9)])) is not first
