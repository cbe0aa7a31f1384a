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

from lade_bench.decoding.core.tree import DraftTree, tree_of_candidates


@dataclass(frozen=True)
class VerificationBranch:
    """The branch part of a step's input: a draft tree rooted at cur (``draft_tree.py``).

    The tree's root is cur, which the step feeds as the window's first token; its other nodes are
    the branch, fed after the window in node order. Its mask and positions come from the tree.

    Attributes:
        tree: the candidates as a :class:`DraftTree` (node i > 0 is branch token i - 1).
        paths: for each candidate, in candidate order, the index into ``tokens`` of each of its
            tokens; ``tokens[paths[i][t]] == candidates[i][t]``.
    """

    tree: DraftTree
    paths: tuple[tuple[int, ...], ...]

    @property
    def tokens(self) -> list[int]:
        """The tokens fed after the window, in input order (a node always after its parent)."""
        return list(self.tree.tokens[1:])


def build_branch(candidates: Sequence[Sequence[int]], layout: str, cur: int = 0) -> VerificationBranch:
    """The candidates' branch in ``layout`` ("flat" or "trie"; ``draft_tree.tree_of_candidates``).

    ``cur``: the root's token. The step feeds cur as the window's first token and verification never
    reads the root's token, so the layout is the same whatever it is.
    """
    tree, nodes = tree_of_candidates(cur, candidates, layout)
    return VerificationBranch(tree, tuple(tuple(node - 1 for node in path) for path in nodes))


def flat_branch(candidates: Sequence[Sequence[int]], cur: int = 0) -> VerificationBranch:
    """Every candidate as its own chain, in order (the paper's layout)."""
    return build_branch(candidates, "flat", cur)


def trie_branch(candidates: Sequence[Sequence[int]], cur: int = 0) -> VerificationBranch:
    """The candidates as a token trie rooted at cur: shared prefixes are fed once.

    Nodes are numbered in order of first appearance (candidate by candidate, token by token), so
    every node comes after its parent and a node's children keep the order of the candidates that
    introduced them. Never more tokens than :func:`flat_branch`.
    """
    return build_branch(candidates, "trie", cur)


BRANCH_BUILDERS: dict[str, Callable[[Sequence[Sequence[int]], int], VerificationBranch]] = {
    "flat": flat_branch,
    "trie": trie_branch,
}
