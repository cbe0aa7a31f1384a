"""The draft tree and its verification: which candidate tokens a step feeds, and which it accepts.

No model here: :class:`DraftTree` is token ids and parent indices rooted at cur;
:func:`verify_tree_greedy` and :func:`verify_tree_sampling` read a step's per-node predictions or
distributions and return the accepted tokens and path. ``draft_tree.py`` runs them on a model
(the seam every drafting method plugs into); lookahead's verification branch (``branch.py``) is
such a tree too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from lade_bench.decoding.core.params import VERIFICATION_LAYOUTS, DecodingConfigError


@dataclass(frozen=True)
class DraftTree:
    """Candidate tokens rooted at the current token ``cur`` (emitted, not yet in the KV cache).

    ``tokens[0]`` is cur (the root), ``parents[0] == -1``; for i > 0, ``0 <= parents[i] < i``.
    Node i sits at position ``p + depth(i)``, p being cur's position; it sees the committed cache and
    exactly its ancestors in the tree (and itself). A chain draft is a tree with one branch.
    Siblings may repeat a token (the flat layout of lookahead does). Checked on construction
    (:meth:`validate`).
    """

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    _depths: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise DecodingConfigError naming the first bad node unless the tree is well formed.

        Sets the node depths as a side effect (the walk that checks the parents computes them).
        """
        if len(self.tokens) != len(self.parents):
            raise DecodingConfigError(
                f"a draft tree needs one parent per token: got {len(self.tokens)} tokens "
                f"and {len(self.parents)} parents"
            )
        if not self.tokens:
            raise DecodingConfigError("a draft tree needs at least its root (cur); got no tokens")
        if self.parents[0] != -1:
            raise DecodingConfigError(f"node 0 is the root (cur): its parent must be -1, got {self.parents[0]!r}")
        depths = [0]
        for node in range(1, len(self.parents)):
            parent = self.parents[node]
            if isinstance(parent, bool) or not isinstance(parent, int) or not 0 <= parent < node:
                raise DecodingConfigError(
                    f"node {node}'s parent is {parent!r}; allowed: an earlier node, 0..{node - 1} (parents come first)"
                )
            depths.append(depths[parent] + 1)
        for node, token in enumerate(self.tokens):
            if isinstance(token, bool) or not isinstance(token, int) or token < 0:
                raise DecodingConfigError(f"node {node}'s token is {token!r}; allowed: a token id (an int >= 0)")
        object.__setattr__(self, "_depths", tuple(depths))

    def depths(self) -> tuple[int, ...]:
        """Each node's depth: 0 for the root, a parent's depth plus one otherwise."""
        return self._depths

    @property
    def size(self) -> int:
        """Nodes of the tree, root included: the tokens one verification forward feeds."""
        return len(self.tokens)

    @property
    def depth(self) -> int:
        """The deepest node's depth: how far past cur's position the forward reaches."""
        return max(self._depths)

    def is_chain(self) -> bool:
        """True when every node's parent is the node before it (one branch, fed in order)."""
        return all(parent == node - 1 for node, parent in enumerate(self.parents))

    def path_to(self, node: int) -> list[int]:
        """The nodes from the root's child down to ``node`` (empty for the root)."""
        path = []
        while node > 0:
            path.append(node)
            node = self.parents[node]
        path.reverse()
        return path

    @classmethod
    def from_chain(cls, cur: int, chain: Sequence[int]) -> DraftTree:
        """cur followed by the draft ``chain``, one branch."""
        return cls((cur, *chain), tuple(range(-1, len(chain))))

    @classmethod
    def from_candidates(cls, cur: int, candidates: Sequence[Sequence[int]], layout: str = "trie") -> DraftTree:
        """Candidate continuations of cur as one tree (:func:`tree_of_candidates`, without the paths)."""
        return tree_of_candidates(cur, candidates, layout)[0]


def tree_of_candidates(
    cur: int, candidates: Sequence[Sequence[int]], layout: str = "trie"
) -> tuple[DraftTree, tuple[tuple[int, ...], ...]]:
    """Candidate continuations of cur as one tree, and each candidate's nodes (its path, root excluded).

    ``flat``: each candidate is its own chain under the root, in order (lookahead's paper layout).
    ``trie``: candidates sharing a prefix share its nodes; each distinct (parent, token) is one node,
    numbered in order of first appearance, so a node's children keep the order of the candidates
    that introduced them. A node's context is the same either way, so is its argmax.
    """
    if layout not in VERIFICATION_LAYOUTS:
        raise DecodingConfigError(f"draft tree layout {layout!r} is not allowed; allowed: {list(VERIFICATION_LAYOUTS)}")
    tokens = [cur]
    parents = [-1]
    node_of: dict[tuple[int, int], int] = {}  # (parent, token) -> node, trie only
    paths = []
    for candidate in candidates:
        parent = 0
        path = []
        for token in candidate:
            node = node_of.get((parent, token)) if layout == "trie" else None
            if node is None:
                node = len(tokens)
                node_of[(parent, token)] = node
                tokens.append(token)
                parents.append(parent)
            path.append(node)
            parent = node
        paths.append(tuple(path))
    return DraftTree(tuple(tokens), tuple(parents)), tuple(paths)


def verify_tree_greedy(predictions: Sequence[int], tree: DraftTree) -> tuple[list[int], list[int]]:
    """(accepted tokens, path nodes): the longest root-to-node path whose every token equals the
    argmax at its parent; ties go to the earliest node; accepted = path tokens + argmax at the path's end.

    ``predictions[i]`` is the argmax of node i's logits. Each accepted token is exactly greedy
    decoding's next token: node i's context is the committed sequence, cur and i's ancestors, all
    accepted, so its argmax is what autoregressive decoding computes there.
    """
    parents, tokens, depths = tree.parents, tree.tokens, tree.depths()
    matched = [True] + [False] * (len(tokens) - 1)
    best = 0
    for node in range(1, len(tokens)):
        parent = parents[node]
        if matched[parent] and tokens[node] == predictions[parent]:
            matched[node] = True
            if depths[node] > depths[best]:
                best = node
    path = tree.path_to(best)
    return [predictions[0], *(predictions[node] for node in path)], path


def verify_tree_sampling(
    probabilities_of_node: Callable[[int], torch.Tensor], tree: DraftTree, generator: torch.Generator
) -> tuple[list[int], list[int]]:
    """(accepted tokens, path nodes) with sampling: autoregressive sampling, read off the tree.

    From the root, draw a token from the node's (warped) distribution; if a child of the node holds
    that token (the earliest such child), move to it and draw again, otherwise stop. Every draw is
    from the target's distribution given the accepted prefix, so the output is distributed exactly as
    autoregressive sampling's; a draft only decides how many draws one forward can serve. (Against
    one-hot drafts this accepts as often as SpecInfer's multi-draft rejection rule: the emitted
    token follows a child with probability the children's total mass either way.)
    """
    children: dict[int, dict[int, int]] = {}
    for node in range(len(tree.tokens) - 1, 0, -1):  # backwards: the earliest child wins
        children.setdefault(tree.parents[node], {})[tree.tokens[node]] = node
    node = 0
    accepted: list[int] = []
    path: list[int] = []
    while True:
        distribution = probabilities_of_node(node)
        token = int(torch.multinomial(distribution.float().cpu(), 1, generator=generator))
        accepted.append(token)
        child = children.get(node, {}).get(token)
        if child is None:
            return accepted, path
        path.append(child)
        node = child
