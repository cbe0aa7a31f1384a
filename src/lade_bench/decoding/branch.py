"""The verification branch of a step: which tokens the G candidates feed, flat or as a token trie.

A branch is the candidates' tokens in input order plus, for each candidate, the branch index of each
of its tokens (its *path*). Every candidate continues ``cur``, so its token at depth d sits at
position ``p + d`` and must see ``cur`` and exactly the tokens before it on its own path.

* ``flat`` (the paper's layout): candidate i's tokens are fed as their own chain, indices
  ``i*(N-1) .. i*(N-1) + N-2``; G candidates cost G*(N-1) input tokens.
* ``trie``: candidates that share a prefix share its tokens; each distinct (parent, token) pair is
  fed once. A node's context (cur, its ancestors, at the same positions) is exactly the context of
  the same token in the flat chain of every candidate through it, so its logits are the same, and
  verification reading "the row of candidate i's token t" gets the same distribution whichever
  layout fed it. Hence identical acceptance at no more input tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class VerificationBranch:
    """The branch part of a step's input.

    Attributes:
        tokens: the tokens fed after the window, in input order (a node always after its parent).
        paths: for each candidate, in candidate order, the index into ``tokens`` of each of its
            tokens; ``tokens[paths[i][t]] == candidates[i][t]``.
    """

    tokens: list[int]
    paths: tuple[tuple[int, ...], ...]


def flat_branch(candidates: Sequence[Sequence[int]]) -> VerificationBranch:
    """Every candidate as its own chain, in order (the paper's layout)."""
    tokens: list[int] = []
    paths = []
    for candidate in candidates:
        start = len(tokens)
        tokens.extend(candidate)
        paths.append(tuple(range(start, len(tokens))))
    return VerificationBranch(tokens, tuple(paths))


def trie_branch(candidates: Sequence[Sequence[int]]) -> VerificationBranch:
    """The candidates as a token trie rooted at cur: shared prefixes are fed once.

    Nodes are numbered in order of first appearance (candidate by candidate, token by token), so
    every node comes after its parent and a node's children keep the order of the candidates that
    introduced them. Never more tokens than :func:`flat_branch`.
    """
    tokens: list[int] = []
    node_of: dict[tuple[int, int], int] = {}  # (parent node or -1 for cur, token) -> node
    paths = []
    for candidate in candidates:
        parent = -1
        path = []
        for token in candidate:
            node = node_of.get((parent, token))
            if node is None:
                node = node_of[(parent, token)] = len(tokens)
                tokens.append(token)
            path.append(node)
            parent = node
        paths.append(tuple(path))
    return VerificationBranch(tokens, tuple(paths))


BRANCH_BUILDERS: dict[str, Callable[[Sequence[Sequence[int]]], VerificationBranch]] = {
    "flat": flat_branch,
    "trie": trie_branch,
}
