"""PIA, Ant Group's lookahead: a trie over prompt and output n-grams drafts a multi-branch tree.

Zhao, Xie, Ye, Wang, Chen, Zhang, Jiang, "Lookahead: An Inference Acceleration Framework for Large
Language Model with Lossless Generation Accuracy", KDD 2024, arXiv 2312.12728. The authors' code is
github.com/alipay/PainlessInferenceAcceleration, ``lookahead/lookahead/common/lookahead_cache.py``
(the trie: ``Tree``, ``LookaheadCache``) and ``lookahead/lookahead/common/pretrained_model.py``
(``lookahead_generation``, ``lookahead_prepare_inputs_for_generation``: when the trie is filled and
read, and the defaults); SGLang's ``--speculative-algorithm NGRAM`` re-implements the algorithm in C++
(sgl-project/sglang, ``python/sglang/srt/speculative/cpp_ngram/``). This is our own implementation
on the engine's draft-tree seam (``lade_bench.decoding.drafters.draft_tree``):

* **The trie** (:class:`PiaState`) is a forest: one tree per head token, holding the token sequences
  that followed it (up to ``branch_length + 1`` tokens), each node with two frequencies: how often the
  current prompt put it there (input) and how often earlier and current outputs did (output). At a
  request's start every n-gram of the prompt goes in (its first token dropped, as the authors drop the
  BOS); output n-grams go in as the generation streams them (a window of ``branch_length + 1`` tokens
  once it is full, the rest at the end). At the end the prompt's frequencies are reset to zero (so a
  prompt helps only its own request) and the output frequencies stay: the state the authors keep
  across requests, the warm-state protocol's state here.
* **Eviction** (the authors' ``squeeze``): after a request, once ``squeeze_after_trees`` trees were
  updated since the last squeeze, each such tree holding more than ``max_nodes`` nodes or more than
  ``max_output_nodes`` output nodes drops every node whose output frequency is at most 1 (with its
  subtree) and halves the others'.
* **The draft** (the authors' ``hier_get``, "hierarchical multi-branch"): the context's last
  ``max_query_length`` tokens are matched from the longest suffix down (the tree of ``context[-2]``
  walked by ``context[-1]``, then the tree of ``context[-1]``), stopping at the first giving at least
  ``branch_length`` nodes. Below the match, children are visited depth-first by the mixed frequency
  ``(1 - w) x input + w x output`` (``w`` = 1e-4: the prompt first, the outputs break ties), to depth
  ``branch_length`` and ``decoding_length`` nodes with cur, so many branches come merged by shared
  prefix into one tree. When the matched subtree holds more than ``decoding_length`` nodes, only nodes
  at least as frequent in outputs as its ``decoding_length // 2``-th most frequent may be drafted
  (the earlier outputs then take over from the prompt).
* **Verification** of that tree in one forward (tree mask, positions by depth): greedy output exactly
  AR's; with sampling, every token is drawn from the target's distribution and the draft followed
  while it agrees (``verify_tree_sampling``), so outputs are distributed exactly as AR sampling's.

Where we differ from the authors' code, and why (docs/pia.md says the same):

* Not a difference, a note: their mixed-mode ``Tree.get`` also computes an input and a mixed
  frequency threshold for large subtrees, but it collects the kept nodes' indices from entries whose
  index is always ``None``, so those two thresholds stay at 1e9 and only the output floor above acts.
  We reproduce the behaviour their code has, not the one its variable names suggest.
* Not a difference either: nodes whose both frequencies are zero (an earlier request's prompt n-grams,
  reset, not yet evicted) are drafted after their counted siblings, as the authors' ``_ravel`` lets
  them in (their ``_match`` and size count skip them). ``draft_earlier_prompts=False`` leaves them out
  (our rule before issue 65, a named setting; docs/pia.md measures it).
* Not a difference: a prompt's n-grams count a head token's tree as updated for the squeeze only when
  the tree existed before (their ``put`` adds only existing trees to ``_update_trees``); output n-grams
  count every tree they touch (``stream_put``).
* The prompt is not cut at a stop id (their ``put`` cuts at the EOS; a chat template's turns end in
  the stop id, which would drop the user's message); the output is cut there, as theirs.

No torch import at the top: the config schema and the plan checks read the defaults and the
validation below without loading it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lade_bench.decoding.core.params import DecodingConfigError, require_int

if TYPE_CHECKING:
    from lade_bench.decoding.core.params import DecodeResult
    from lade_bench.decoding.drafters.draft_tree import DrafterRun, DraftTree, TreeStep

# The authors' defaults, stated once (the config section and the engine function read them). Files are
# in alipay/PainlessInferenceAcceleration, lookahead/lookahead/common/.
PIA_DECODING_LENGTH = 64  # pretrained_model.py: decoding_kwargs 'decoding_length' (draft nodes, cur included)
PIA_BRANCH_LENGTH = 12  # pretrained_model.py: 'branch_length' (deepest draft node; n-grams of +1 go in)
PIA_MAX_QUERY_LENGTH = 2  # pretrained_model.py: 'max_query_length' (context tokens matched in the trie)
PIA_MAX_NODES = 65536  # lookahead_cache.py: LookaheadCache(max_node=65536), per head token's tree
PIA_MAX_OUTPUT_NODES = 512  # lookahead_cache.py: LookaheadCache(max_output_node=512), per tree
PIA_SQUEEZE_AFTER_TREES = 1024  # lookahead_cache.py: squeeze_branch_counts runs once 1024 trees were updated
# Fixed in the authors' code, not settings there either:
PIA_OUTPUT_WEIGHT = 1e-4  # Tree.get(output_weight=1e-4): the mixed frequency's weight of outputs
# Tree._ravel drafts nodes an earlier prompt left at frequency zero (not yet squeezed): the authors' default.
PIA_DRAFT_EARLIER_PROMPTS = True


@dataclass(frozen=True)
class PiaSettings:
    """PIA's settings, checked on construction (a ``DecodingConfigError`` names the bad one).

    Attributes:
        decoding_length: most nodes of a draft tree, cur included (the forward's width).
        branch_length: deepest draft node below cur; the trie holds n-grams of ``branch_length + 1``
            tokens after each head token.
        max_query_length: context tokens matched in the trie (longest suffix first).
        max_nodes: a tree (one head token) holding more nodes than this is squeezed.
        max_output_nodes: a tree holding more output nodes than this is squeezed.
        squeeze_after_trees: squeezing runs at a request's end once this many trees were updated.
        draft_earlier_prompts: draft the nodes an earlier request's prompt left at frequency zero (not
            yet squeezed) after their counted siblings, as the authors' ``Tree._ravel`` does; False:
            only nodes some frequency counts (our rule before issue 65; cells recorded without the key
            ran it).
    """

    decoding_length: int = PIA_DECODING_LENGTH
    branch_length: int = PIA_BRANCH_LENGTH
    max_query_length: int = PIA_MAX_QUERY_LENGTH
    max_nodes: int = PIA_MAX_NODES
    max_output_nodes: int = PIA_MAX_OUTPUT_NODES
    squeeze_after_trees: int = PIA_SQUEEZE_AFTER_TREES
    draft_earlier_prompts: bool = PIA_DRAFT_EARLIER_PROMPTS

    def __post_init__(self) -> None:
        # decoding_length 1 or branch_length 0 would never draft (the authors fall back to plain decoding).
        require_int("pia.decoding_length", self.decoding_length, minimum=2)
        require_int("pia.branch_length", self.branch_length, minimum=1)
        require_int("pia.max_query_length", self.max_query_length, minimum=1)
        require_int("pia.max_nodes", self.max_nodes, minimum=1)
        require_int("pia.max_output_nodes", self.max_output_nodes, minimum=1)
        require_int("pia.squeeze_after_trees", self.squeeze_after_trees, minimum=1)
        if not isinstance(self.draft_earlier_prompts, bool):
            raise DecodingConfigError(
                f"pia.draft_earlier_prompts={self.draft_earlier_prompts!r} is not allowed: use true or false"
            )


class _Node:
    """A trie node: its children by token and its input (current prompt) and output frequencies."""

    __slots__ = ("children", "inputs", "outputs")

    def __init__(self, inputs: float, outputs: float) -> None:
        self.children: dict[int, _Node] = {}
        self.inputs = inputs
        self.outputs = outputs

    def live(self) -> bool:
        """True while some frequency is positive (a node at zero awaits eviction and is never drafted)."""
        return self.inputs > 0 or self.outputs > 0

    def mixed(self) -> float:
        """The draft order's key: the prompt first, the outputs breaking ties (``PIA_OUTPUT_WEIGHT``)."""
        return (1.0 - PIA_OUTPUT_WEIGHT) * self.inputs + PIA_OUTPUT_WEIGHT * self.outputs


class _HeadTree:
    """The continuations seen after one head token, and the node counts the eviction reads."""

    __slots__ = ("nodes", "n_nodes", "n_output_nodes")

    def __init__(self) -> None:
        self.nodes: dict[int, _Node] = {}
        self.n_nodes = 0
        self.n_output_nodes = 0

    def put(self, tokens: Sequence[int], output: bool) -> None:
        """Count ``tokens`` along their path (+1 on each node), creating the nodes missing."""
        nodes = self.nodes
        for k, token in enumerate(tokens):
            node = nodes.get(token)
            if node is None:
                created = len(tokens) - k
                for new in tokens[k:]:
                    node = nodes[new] = _Node(0.0 if output else 1.0, 1.0 if output else 0.0)
                    nodes = node.children
                self.n_nodes += created
                if output:
                    self.n_output_nodes += created
                return
            if output:
                node.outputs += 1.0
            else:
                node.inputs += 1.0
            nodes = node.children

    def reset_inputs(self) -> None:
        """Set every input frequency to zero (a prompt counts for its own request only)."""
        stack = [self.nodes]
        while stack:
            for node in stack.pop().values():
                if node.inputs:
                    node.inputs = 0.0
                    stack.append(node.children)

    def squeeze(self, max_nodes: int, max_output_nodes: int) -> None:
        """Over a bound: drop nodes of output frequency <= 1 (with their subtrees), halve the others'."""
        if self.n_nodes <= max_nodes and self.n_output_nodes <= max_output_nodes:
            return
        kept = 0
        stack = [self.nodes]
        while stack:
            nodes = stack.pop()
            for token, node in list(nodes.items()):
                if node.outputs > 1.0:
                    node.outputs *= 0.5
                    kept += 1
                    stack.append(node.children)
                else:
                    del nodes[token]
        # The authors recount both counters as the nodes left (every node left has an output frequency).
        self.n_nodes = self.n_output_nodes = kept


class PiaState:
    """The trie, kept across a cell's requests: output n-grams persist, a prompt's only for its request.

    Attributes:
        branch_length: the n-grams stored after each head token are ``branch_length + 1`` long.
        max_nodes, max_output_nodes, squeeze_after_trees: the eviction's bounds (:class:`PiaSettings`).
        requests_seen: requests finished with this state before the current one (warm-state protocol).
    """

    def __init__(
        self,
        branch_length: int = PIA_BRANCH_LENGTH,
        max_nodes: int = PIA_MAX_NODES,
        max_output_nodes: int = PIA_MAX_OUTPUT_NODES,
        squeeze_after_trees: int = PIA_SQUEEZE_AFTER_TREES,
    ) -> None:
        self.branch_length = branch_length
        self.max_nodes = max_nodes
        self.max_output_nodes = max_output_nodes
        self.squeeze_after_trees = squeeze_after_trees
        self.requests_seen = 0
        self._trees: dict[int, _HeadTree] = {}
        self._updated: set[int] = set()  # head tokens whose tree changed since the last squeeze
        self._prompted: set[int] = set()  # head tokens whose tree holds the current prompt's counts
        self._pending: list[int] = []  # streamed output tokens whose n-gram window is not full yet

    def size(self) -> int:
        """Trie nodes held, as the authors count them (every tree's ``n_node``)."""
        return sum(tree.n_nodes for tree in self._trees.values())

    def check(self, settings: PiaSettings, model: Any = None) -> None:
        """Raise DecodingConfigError when ``settings`` shape the trie otherwise than this state does (any model)."""
        mine = (self.branch_length, self.max_nodes, self.max_output_nodes, self.squeeze_after_trees)
        theirs = (settings.branch_length, settings.max_nodes, settings.max_output_nodes, settings.squeeze_after_trees)
        if mine != theirs:
            raise DecodingConfigError(
                f"a PIA state of (branch_length, max_nodes, max_output_nodes, squeeze_after_trees)={mine} "
                f"cannot run {theirs}: a state serves the settings it was built with"
            )

    def _put_ngrams(self, tokens: Sequence[int], heads: int, output: bool) -> None:
        """Put the n-gram after each of the first ``heads`` tokens into its head token's tree.

        A tree counts as updated for the squeeze when an output n-gram goes in, or a prompt's goes into
        a tree that existed before: the authors' ``put`` leaves the trees a prompt creates out of
        ``_update_trees``, their ``stream_put`` counts every tree.
        """
        span = self.branch_length + 1
        for i in range(heads):
            head = tokens[i]
            tree = self._trees.get(head)
            if tree is None:
                tree = self._trees[head] = _HeadTree()
                if output:
                    self._updated.add(head)
            else:
                self._updated.add(head)
            tree.put(tokens[i + 1 : i + 1 + span], output)
            if not output:
                self._prompted.add(head)

    def put_prompt(self, prompt: Sequence[int]) -> None:
        """Put every n-gram of a request's prompt (its first token dropped, as the authors drop the BOS)."""
        tokens = [int(t) for t in prompt[1:]]
        if len(tokens) >= 2:
            self._put_ngrams(tokens, len(tokens) - 1, output=False)

    def stream_output(self, tokens: Iterable[int]) -> None:
        """Put the n-grams whose window of ``branch_length + 1`` tokens the new output tokens filled."""
        self._pending.extend(int(t) for t in tokens)
        span = self.branch_length + 1
        full = len(self._pending) - span
        if full > 0:
            self._put_ngrams(self._pending, full, output=True)
            del self._pending[:full]

    def finish(self, tokens: Iterable[int], stop_ids: Iterable[int] = ()) -> None:
        """End a request: its last output tokens (cut at the first stop id) go in, the prompt counts
        are reset and, once enough trees were updated, the trie is squeezed."""
        stops = set(stop_ids)
        for token in tokens:
            if int(token) in stops:
                break
            self._pending.append(int(token))
        if len(self._pending) > 1:
            self._put_ngrams(self._pending, len(self._pending) - 1, output=True)
        self._pending.clear()
        for head in self._prompted:
            tree = self._trees.get(head)
            if tree is not None:
                tree.reset_inputs()
        self._prompted.clear()
        if len(self._updated) >= self.squeeze_after_trees:
            for head in self._updated:
                tree = self._trees.get(head)
                if tree is not None:
                    tree.squeeze(self.max_nodes, self.max_output_nodes)
            self._updated.clear()

    def draft(
        self,
        context: Sequence[int],
        decoding_length: int,
        branch_length: int,
        max_query_length: int,
        earlier_prompts: bool = PIA_DRAFT_EARLIER_PROMPTS,
    ) -> tuple[list[int], list[int]]:
        """(tokens, parents) of the draft continuing ``context``, rooted at ``context[-1]`` (parent -1).

        The authors' ``hier_get``: each suffix of the query (longest first) is looked up, the last
        lookup kept, stopping at one of at least ``branch_length`` nodes. ``earlier_prompts``: draft
        the nodes at frequency zero too (``PiaSettings.draft_earlier_prompts``).
        """
        query = [int(t) for t in context[-max_query_length:]]
        cur = query[-1]
        drafted: tuple[list[int], list[int]] = ([cur], [-1])
        for i, head in enumerate(query):
            tree = self._trees.get(head)
            if tree is None:
                continue
            drafted = _draft_below(tree, query[i + 1 :], cur, decoding_length, branch_length, earlier_prompts)
            if len(drafted[0]) >= branch_length:
                break
        return drafted


def _draft_below(
    tree: _HeadTree, walk: Sequence[int], cur: int, decoding_length: int, branch_length: int, earlier_prompts: bool
) -> tuple[list[int], list[int]]:
    """The authors' ``Tree.get`` in mixed mode: the subtree below ``walk`` raveled depth-first (nodes at
    zero included when ``earlier_prompts``; the walk and the floor never count them, as the authors')."""
    nodes = tree.nodes
    for token in walk:
        node = nodes.get(token)
        if node is None or not node.live():
            return [cur], [-1]
        nodes = node.children
    floor = _output_floor(nodes, decoding_length)
    tokens, parents = [cur], [-1]
    _ravel(nodes, 0, branch_length, decoding_length, floor, earlier_prompts, tokens, parents)
    return tokens, parents


def _output_floor(nodes: dict[int, _Node], decoding_length: int) -> float:
    """Least output frequency a node of a subtree needs to be drafted (0: any live node).

    A subtree of more than ``decoding_length`` live nodes drafts only nodes at least as frequent in
    outputs as its ``decoding_length // 2``-th most frequent (the authors' ``min_output_size``): what
    their mixed-mode ``Tree.get`` does (see the module docstring).
    """
    outputs: list[float] = []
    stack = [nodes]
    while stack:
        for node in stack.pop().values():
            if node.live():
                outputs.append(node.outputs)
                stack.append(node.children)
    if len(outputs) <= decoding_length:
        return 0.0
    outputs.sort(reverse=True)
    return outputs[max(decoding_length // 2, 1) - 1]


def _ravel(
    nodes: dict[int, _Node],
    parent: int,
    depth_left: int,
    decoding_length: int,
    floor: float,
    earlier_prompts: bool,
    tokens: list[int],
    parents: list[int],
) -> None:
    """Append the children of ``parent`` best-first by mixed frequency, each followed by its subtree.

    A node below the output ``floor`` is skipped; a node at zero (mixed frequency 0, so after its
    counted siblings) is skipped unless ``earlier_prompts`` (the authors' ``_ravel`` keeps it: with no
    floor their mixed threshold is 0, which a zero does not fall below).
    """
    if depth_left <= 0:
        return
    # sorted is stable: equal frequencies keep the trie's insertion order, as in the authors' code.
    for token, node in sorted(nodes.items(), key=lambda item: item[1].mixed(), reverse=True):
        if len(tokens) >= decoding_length:
            return
        if node.outputs < floor or not (earlier_prompts or node.live()):
            continue
        tokens.append(token)
        parents.append(parent)
        if node.children:
            _ravel(
                node.children, len(tokens) - 1, depth_left - 1, decoding_length, floor, earlier_prompts, tokens, parents
            )


class PiaDrafter:
    """The ``Drafter`` of PIA for one request: the prompt goes in first, the output as it streams."""

    def __init__(self, state: PiaState, settings: PiaSettings, prompt: Sequence[int]) -> None:
        self.state = state
        self.settings = settings
        self._known = len(prompt)  # context tokens already given to the trie (or deliberately not)
        state.put_prompt(prompt)

    def propose(self, context: Sequence[int]) -> DraftTree:
        """Stream the tokens emitted since the last call into the trie, then draft from the context's suffix.

        The context is the prompt plus every emitted token (a step's accepted tokens cut at a stop id
        and the budget), so the tokens since the last call are the authors' ``next_token_list``.
        """
        from lade_bench.decoding.drafters.draft_tree import DraftTree

        self.state.stream_output(context[self._known :])
        self._known = len(context)
        settings = self.settings
        tokens, parents = self.state.draft(
            context,
            settings.decoding_length,
            settings.branch_length,
            settings.max_query_length,
            settings.draft_earlier_prompts,
        )
        return DraftTree(tuple(tokens), tuple(parents))

    def observe(self, step: TreeStep) -> None:
        """Nothing: the step's emitted tokens arrive in the next context (``step.accepted`` is not cut yet)."""

    def finish(self, context: Sequence[int], stop_ids: Iterable[int]) -> None:
        """End the request: the context's tokens not streamed yet go in (up to a stop id), the prompt's
        counts are reset."""
        self.state.finish(context[self._known :], stop_ids)
        self._known = len(context)


def new_pia_state(settings: PiaSettings) -> PiaState:
    """An empty trie shaped as ``settings`` say."""
    return PiaState(settings.branch_length, settings.max_nodes, settings.max_output_nodes, settings.squeeze_after_trees)


def pia_reach(settings: PiaSettings) -> Any:
    """How far a step reaches: ``branch_length`` past cur, at most ``decoding_length`` nodes with cur."""
    from lade_bench.decoding.drafters.draft_tree import draft_reach

    return draft_reach("PIA", settings.branch_length, settings.decoding_length)


def start_pia_request(
    state: PiaState, settings: PiaSettings, prompt: Sequence[int], stop_ids: Iterable[int]
) -> DrafterRun:
    """One request's drafter on the cell's trie (its prompt put in now), and its end (``close``).

    A failed generation still ends its request (its prompt counts reset for the cell's next one). The
    fidelity test drives this.
    """
    from lade_bench.decoding.drafters.draft_tree import DrafterRun

    drafter = PiaDrafter(state, settings, prompt)
    return DrafterRun(drafter, close=lambda context: drafter.finish(context, stop_ids))


def pia_generate(
    model: Any,
    input_ids: Sequence[int] | Any,
    max_new_tokens: int,
    settings: PiaSettings | None = None,
    *,
    state: PiaState | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    seed: int = 0,
    sampling: Any = None,
) -> DecodeResult:
    """PIA generation: greedy output exactly AR's; sampled output distributed as AR's.

    Args:
        model, input_ids, max_new_tokens, eos_token_id, seed, sampling: as ``draft_tree.run_drafter``'s.
        settings: :class:`PiaSettings` (None: the defaults).
        state: the trie to use and extend (a cell's warm state); None: a fresh one (cold: only this
            request's prompt and output are matched). Stop ids are emitted, never put in the trie.

    Returns:
        The ``DecodeResult`` of ``draft_tree_generate``, its ``method`` ``"pia"``; the warm-state
        counters are added by the caller (``methods.use_state``).

    Raises:
        DecodingConfigError: a ``state`` shaped otherwise than the settings say.
    """
    from lade_bench.decoding.core.checks import eos_set
    from lade_bench.decoding.drafters.draft_tree import run_drafter

    settings = settings or PiaSettings()
    stop_ids = eos_set(eos_token_id)

    def start(state: PiaState, prompt: list[int]) -> DrafterRun:
        return start_pia_request(state, settings, prompt, stop_ids)

    return run_drafter(
        model,
        input_ids,
        max_new_tokens,
        settings,
        state,
        method="pia",
        new_state=new_pia_state,
        start=start,
        reach=pia_reach(settings),
        eos_token_id=eos_token_id,
        seed=seed,
        sampling=sampling,
    )
