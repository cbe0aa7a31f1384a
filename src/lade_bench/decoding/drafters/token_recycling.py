"""Token Recycling: draft from the top-k successors the model already computed, verified as a tree.

Luo et al., "Turning Trash into Treasure: Accelerating Inference of Large Language Models with Token
Recycling", ACL 2025, arXiv 2408.08696; the authors' code is github.com/Luowaterbi/TokenRecycling
(``evaluation/inference_recycling.py``, ``model/recycling/tree_template_.py``), also shipped by Spec-Bench
(hemingkx/Spec-Bench, ``model/recycling``). This is our own implementation of the method on the
engine's draft-tree seam (``lade_bench.decoding.drafters.draft_tree``).

The method in three parts:

* **An adjacency matrix** ``[vocab, k]`` (k = 8 in the paper): row ``t`` holds the top-k tokens the
  model last predicted after token ``t``. After every decode forward it is refreshed from the logits at
  each input position: ``adj[input_ids] = topk(logits, k)``, the "trash" candidates of every position,
  accepted or not.
* **The authors' loop** (Spec-Bench ``evaluation/inference_recycling.py``, ``recycling_forward``,
  identical in Luowaterbi/TokenRecycling 1b4c05c): the prefill feeds ``prompt[:-1]`` and its logits
  are discarded; the first decode step feeds the prompt's last token as the root of the tree drafted
  from ``adj[last prompt token]``; the forward that ends the loop refreshes nothing (it breaks before
  the update). These are the defaults; our earlier loop is kept as two named settings
  (:class:`TokenRecyclingSettings`: ``prefill_refresh``, ``loop``).
* **A static tree template**: each node is a path of child ranks from the root, ``(0, 2)`` being "the
  third successor of the first successor". The draft is the template expanded breadth-first from the
  current token through the matrix. The paper's default, ``"2.2.2"``, has 80 nodes, depth 6.
* **Verification** of that tree in one forward (tree mask, positions by depth), the longest path whose
  every token is the argmax at its parent: exact greedy output (``draft_tree_generate``).

The matrix persists across the requests of a cell (the paper's setting: the authors allocate it once
and never reset it between questions); :class:`RecyclingState` is that persistent part, the
warm-state protocol's state object (``requests_seen``, ``size()``; docs/adding_a_method.md).

No torch import at the top: the config schema reads the defaults below without waiting for torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lade_bench.decoding.core.params import DecodingConfigError

if TYPE_CHECKING:
    from lade_bench.decoding.core.params import DecodeResult
    from lade_bench.decoding.drafters.draft_tree import DraftTree, TreeStep

# The paper's defaults, stated once (the config section and the engine function read them).
TOKEN_RECYCLING_TOP_K = 8  # successors kept per token: the authors' --output-id-topk default
TOKEN_RECYCLING_TREE = "2.2.2"  # the authors' --tree_version default: 80 nodes, depth 6

# The generation loops ``TokenRecyclingSettings.loop`` names (module docstring; docs/token_recycling.md).
AUTHORS_LOOP = "authors"  # prefill prompt[:-1], first tree from the last prompt token, last forward not recycled
WHOLE_PROMPT_LOOP = "whole_prompt_prefill"  # ours before issue 65: prefill all, first token from it, all recycled
TOKEN_RECYCLING_LOOPS = (AUTHORS_LOOP, WHOLE_PROMPT_LOOP)

# The authors' templates (model/recycling/tree_template_.py), node = child ranks from the root.
TREE_TEMPLATES: dict[str, tuple[tuple[int, ...], ...]] = {
    "2.2.2": (
        *((i,) for i in range(8)),
        *((0, i) for i in range(8)),
        (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 1), (2, 2), (3, 0), (3, 1), (4, 0), (5, 0), (6, 0), (7, 0),
        *((0, 0, i) for i in range(8)),
        (0, 1, 0), (0, 1, 1), (0, 1, 2), (0, 2, 0), (0, 2, 1), (0, 3, 0), (0, 4, 0), (0, 5, 0), (0, 6, 0), (0, 7, 0),
        (1, 0, 0), (1, 0, 1), (1, 1, 0), (2, 0, 0), (3, 0, 0), (4, 0, 0), (5, 0, 0),
        (0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 2), (0, 0, 0, 3), (0, 0, 0, 4), (0, 0, 1, 0), (0, 0, 1, 1),
        (0, 0, 2, 0), (0, 0, 3, 0), (0, 0, 4, 0), (0, 1, 0, 0), (0, 2, 0, 0), (1, 0, 0, 0), (2, 0, 0, 0),
        (3, 0, 0, 0),
        (0, 0, 0, 0, 0), (0, 0, 0, 0, 1), (0, 0, 0, 0, 2), (0, 0, 0, 1, 0), (0, 0, 0, 2, 0), (0, 0, 1, 0, 0),
        (0, 1, 0, 0, 0), (1, 0, 0, 0, 0),
        (0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 1), (0, 0, 0, 1, 0, 0),
    ),
}  # fmt: skip


@dataclass(frozen=True)
class TreeTemplate:
    """A validated tree template and the index arrays its breadth-first expansion uses.

    Attributes:
        paths: node -> child ranks from the root (node ``i`` of the draft tree is ``paths[i - 1]``;
            node 0 is the root, the current token).
        parents: draft-tree parent of every node, root first (``-1``), as ``DraftTree.parents``.
        layers: per depth 1, 2, ...: (node indices, their parents' node indices, their ranks).
    """

    paths: tuple[tuple[int, ...], ...]
    parents: tuple[int, ...]
    layers: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]

    @property
    def depth(self) -> int:
        """Longest path below the root."""
        return max(len(p) for p in self.paths)

    @property
    def size(self) -> int:
        """Draft nodes below the root (the paper's "80 nodes")."""
        return len(self.paths)


def tree_template(tree: str | Sequence[Sequence[int]], top_k: int, section: str = "token_recycling") -> TreeTemplate:
    """The template ``tree`` names (a key of ``TREE_TEMPLATES``) or spells out (a list of rank paths).

    ``section`` names the config section in the messages (SAM-Decoding's fallback tree is checked here too).

    Raises:
        DecodingConfigError: an unknown name, ``top_k`` < 1, or a malformed template (an empty one, a
            path with a rank outside ``[0, top_k)``, a repeated path, a path before its parent): the
            message names the bad node and the rule.
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise DecodingConfigError(f"{section}.top_k={top_k!r} is not allowed: use an integer >= 1")
    if isinstance(tree, str):
        if tree not in TREE_TEMPLATES:
            raise DecodingConfigError(
                f"{section}.tree={tree!r} is not a known template; use one of {sorted(TREE_TEMPLATES)} "
                "or a list of rank paths such as [[0], [1], [0, 0]]"
            )
        paths = TREE_TEMPLATES[tree]
    else:
        paths = tuple(tuple(path) for path in tree)
    return _validated(paths, top_k, section)


def _validated(paths: tuple[tuple[int, ...], ...], top_k: int, section: str) -> TreeTemplate:
    if not paths:
        raise DecodingConfigError(f"{section}.tree is empty: give at least one node, e.g. [[0]]")
    index: dict[tuple[int, ...], int] = {(): 0}
    parents = [-1]
    for node, path in enumerate(paths, start=1):
        if not path:
            raise DecodingConfigError(f"{section}.tree node {node - 1} is the empty path (the root is implicit)")
        for rank in path:
            if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < top_k:
                raise DecodingConfigError(
                    f"{section}.tree node {node - 1} {list(path)}: rank {rank!r} is not in [0, top_k={top_k})"
                )
        if path in index:
            raise DecodingConfigError(f"{section}.tree node {node - 1} {list(path)} repeats an earlier node")
        parent = index.get(path[:-1])
        if parent is None:
            raise DecodingConfigError(
                f"{section}.tree node {node - 1} {list(path)} comes before its parent {list(path[:-1])}: "
                "list every node after its parent"
            )
        index[path] = node
        parents.append(parent)
    by_depth: dict[int, list[int]] = {}
    for node, path in enumerate(paths, start=1):
        by_depth.setdefault(len(path), []).append(node)
    layers = tuple(
        (
            np.array(nodes, dtype=np.int64),
            np.array([parents[n] for n in nodes], dtype=np.int64),
            np.array([paths[n - 1][-1] for n in nodes], dtype=np.int64),
        )
        for _, nodes in sorted(by_depth.items())
    )
    return TreeTemplate(tuple(paths), tuple(parents), layers)


class RecyclingState:
    """The persistent part of Token Recycling: the adjacency matrix, kept across a cell's requests.

    Attributes:
        top_k: successors per row.
        requests_seen: requests finished with this state before the current one (warm-state protocol).
        adjacency: ``[vocab, top_k]`` successor ids (zeros where never refreshed, as in the authors'
            code); allocated on the first refresh, when the model's vocabulary size is known.
    """

    def __init__(self, top_k: int = TOKEN_RECYCLING_TOP_K) -> None:
        self.top_k = top_k
        self.requests_seen = 0
        self.adjacency: np.ndarray | None = None
        self._filled: np.ndarray | None = None

    def size(self) -> int:
        """Rows of the matrix refreshed at least once (vocabulary tokens whose successors it knows)."""
        return 0 if self._filled is None else int(np.count_nonzero(self._filled))

    def check(self, settings: TokenRecyclingSettings, model: Any) -> None:
        """Raise DecodingConfigError when ``settings`` ask for another width than this matrix has."""
        if self.top_k != settings.top_k:
            raise DecodingConfigError(
                f"a Token Recycling state of top_k={self.top_k} cannot run top_k={settings.top_k}"
            )

    def refresh(self, input_ids: Sequence[int] | np.ndarray, logits: Any) -> None:
        """``adj[input_ids] = topk(logits, k)``: row ``input_ids[i]`` gets the top-k of ``logits[i]``.

        Args:
            input_ids: the token ids a forward fed (one per logits row).
            logits: ``[len(input_ids), vocab]`` (a leading batch dimension of 1 is allowed), any device.

        A token fed twice keeps the row of its last position (numpy's assignment order), so the
        matrix does not depend on the device's scatter order.
        """
        scores = logits.reshape(-1, logits.shape[-1])
        ids = np.asarray(input_ids, dtype=np.int64).reshape(-1)
        if len(ids) != scores.shape[0]:
            raise ValueError(f"refresh: {len(ids)} input ids for {scores.shape[0]} logits rows")
        vocab = int(scores.shape[-1])
        if self.adjacency is None:
            self.adjacency = np.zeros((vocab, self.top_k), dtype=np.int64)
            self._filled = np.zeros(vocab, dtype=bool)
        elif self.adjacency.shape[0] != vocab:
            raise ValueError(
                f"this Token Recycling state holds a vocabulary of {self.adjacency.shape[0]} tokens and the "
                f"model's logits have {vocab}: a state serves one model"
            )
        top = scores.topk(self.top_k, dim=-1).indices.cpu().numpy()
        self.adjacency[ids] = top
        assert self._filled is not None
        self._filled[ids] = True

    def expand(self, root: int, template: TreeTemplate) -> np.ndarray:
        """Token of every draft-tree node: the template expanded breadth-first from ``root``.

        Node ``i``'s token is ``adj[token of its parent, rank of i]``; before the first refresh every
        successor is token 0 (the authors' zero-initialised matrix).
        """
        tokens = np.zeros(template.size + 1, dtype=np.int64)
        tokens[0] = root
        if self.adjacency is None:
            return tokens
        for nodes, parents, ranks in template.layers:
            tokens[nodes] = self.adjacency[tokens[parents], ranks]
        return tokens


class TokenRecyclingDrafter:
    """The ``Drafter`` of Token Recycling: proposes the expanded template, learns from every forward.

    ``recycle_last``: False skips the refresh from the forward that ends the generation, as the
    authors' loop does (it breaks before its update); SAM-Decoding's fallback keeps the default True.
    """

    def __init__(self, state: RecyclingState, template: TreeTemplate, recycle_last: bool = True) -> None:
        self.state = state
        self.template = template
        self.recycle_last = recycle_last

    def propose(self, context: Sequence[int]) -> DraftTree:
        """The template expanded from ``context[-1]`` (the current token)."""
        from lade_bench.decoding.drafters.draft_tree import DraftTree

        tokens = self.state.expand(int(context[-1]), self.template)
        return DraftTree(tuple(tokens.tolist()), self.template.parents)

    def observe(self, step: TreeStep) -> None:
        """Refresh the rows of every token the step fed, accepted or not (the recycled "trash")."""
        if step.last and not self.recycle_last:
            return
        self.state.refresh(step.tree.tokens, step.logits)

    def prefill_observer(self, prompt_ids: Sequence[int]) -> Callable[[Any], None]:
        """A callback refreshing the rows of the prompt's tokens from the prefill's logits.

        The logits may cover only the prompt's last positions (an engine that keeps fewer rows):
        they are aligned with the prompt's end.
        """
        prompt = list(prompt_ids)

        def observe_prefill(logits: Any) -> None:
            rows = logits.reshape(-1, logits.shape[-1])
            self.state.refresh(prompt[len(prompt) - rows.shape[0] :], rows)

        return observe_prefill


@dataclass(frozen=True)
class TokenRecyclingSettings:
    """Token Recycling's settings (the config section ``token_recycling``), checked on construction.

    Attributes:
        top_k: successors kept per vocabulary token (the adjacency matrix's width; the template's ranks
            must be below it).
        tree: the static tree template: a name in ``TREE_TEMPLATES`` or a list of rank paths.
        prefill_refresh: the prefill's logits refresh the matrix too (our loop before issue 65). The
            authors' default, False: their ``recycling_forward`` discards the prefill's logits.
        loop: ``"authors"`` (default): the prefill feeds ``prompt[:-1]``, the first decode step's tree
            is rooted at the prompt's last token, the final forward refreshes nothing, the authors'
            drafts step by step. ``"whole_prompt_prefill"``: our loop before issue 65: the prefill feeds
            the whole prompt and gives the first token, the first tree is rooted at that token, every
            decode forward refreshes the matrix.

    Raises:
        DecodingConfigError: a bad ``top_k``, ``tree``, ``prefill_refresh`` or ``loop``, named with what
            is allowed.
    """

    top_k: int = TOKEN_RECYCLING_TOP_K
    tree: Any = TOKEN_RECYCLING_TREE
    prefill_refresh: bool = False
    loop: str = AUTHORS_LOOP

    def __post_init__(self) -> None:
        if not isinstance(self.prefill_refresh, bool):
            raise DecodingConfigError(
                f"token_recycling.prefill_refresh={self.prefill_refresh!r} is not allowed: use true or false"
            )
        if self.loop not in TOKEN_RECYCLING_LOOPS:
            raise DecodingConfigError(
                f"token_recycling.loop={self.loop!r} is not allowed: use one of {list(TOKEN_RECYCLING_LOOPS)}"
            )
        self.template()

    def template(self) -> TreeTemplate:
        """The validated tree template."""
        return tree_template(self.tree, self.top_k)


def new_recycling_state(settings: TokenRecyclingSettings) -> RecyclingState:
    """An empty adjacency matrix ``settings.top_k`` wide."""
    return RecyclingState(settings.top_k)


def token_recycling_generate(
    model: Any,
    input_ids: Sequence[int] | Any,
    max_new_tokens: int,
    settings: TokenRecyclingSettings | None = None,
    *,
    state: RecyclingState | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    seed: int = 0,
    sampling: Any = None,
) -> DecodeResult:
    """Token Recycling generation: greedy output exactly AR's; sampled output distributed as AR's.

    Args:
        model, input_ids, max_new_tokens, eos_token_id, seed, sampling: as ``draft_tree.run_drafter``'s.
        settings: :class:`TokenRecyclingSettings` (None: the defaults).
        state: the persistent matrix to use and update (a cell's warm state); None: a fresh one (cold).

    Returns:
        The ``DecodeResult`` of ``draft_tree_generate``, its ``method`` ``"token_recycling"``; the
        warm-state counters are added by the caller (``methods.use_state``).

    Raises:
        DecodingConfigError: a ``state`` of another ``top_k``.
    """
    from lade_bench.decoding.drafters.draft_tree import DrafterRun, run_drafter

    settings = settings or TokenRecyclingSettings()
    template = settings.template()

    authors = settings.loop == AUTHORS_LOOP

    def start(state: RecyclingState, prompt: list[int]) -> DrafterRun:
        drafter = TokenRecyclingDrafter(state, template, recycle_last=not authors)
        # The authors' prefill feeds prompt[:-1] (draft_tree_generate prefills a one-token prompt whole).
        prefilled = prompt[:-1] if authors and len(prompt) > 1 else prompt
        observer = drafter.prefill_observer(prefilled) if settings.prefill_refresh else None
        return DrafterRun(drafter, prefill_observer=observer, hold_last_prompt_token=authors)

    return run_drafter(
        model,
        input_ids,
        max_new_tokens,
        settings,
        state,
        method="token_recycling",
        new_state=new_recycling_state,
        start=start,
        reach=token_recycling_reach(settings),
        eos_token_id=eos_token_id,
        seed=seed,
        sampling=sampling,
    )


def token_recycling_reach(settings: TokenRecyclingSettings) -> Any:
    """How far a step reaches: the template's depth past cur, its nodes plus cur fed at once."""
    from lade_bench.decoding.drafters.draft_tree import draft_reach

    template = settings.template()
    return draft_reach("Token Recycling", template.depth, template.size + 1)
