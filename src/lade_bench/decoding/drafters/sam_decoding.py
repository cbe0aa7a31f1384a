"""SAM-Decoding: chains read off a suffix automaton of the context, Token Recycling's tree otherwise.

Hu, Zheng, Li, Yu, Li, Mao, Du, Dai, "SAM Decoding: Speculative Decoding via Suffix Automaton", ACL
2025, arXiv 2411.10666. The authors' code is github.com/hyx1999/SAM-Decoding (``samd/sam/dyn_sam.py``,
``samd/sam/static_sam.py``, ``samd/draft.py``, ``samd/samd_model.py``, ``samd/samd_config.py``,
``samd/tree_model/token_recycle/token_recycle.py``, ``samd/config/token_recycle.json``), also shipped
by Spec-Bench (hemingkx/Spec-Bench, ``model/samd``). This is our own implementation of the method on
the engine's draft-tree seam (``lade_bench.decoding.drafters.draft_tree``):

* **A suffix automaton per request** (:class:`SuffixAutomaton`, Blumer et al. 1985) over the prompt
  and every token emitted so far, extended one token at a time in amortised O(1). The extension that
  adds the current token ``cur`` also yields the longest suffix of the context that occurred earlier
  in it (the authors' ``DynSAM.lookup(start_token)`` on an automaton holding everything before cur)
  and the end of its first occurrence (``min_endpos``), where the draft continues from.
* **A chain** when that match is at least ``len_threshold`` tokens: the tokens that followed its first
  occurrence, up to ``n_predicts`` fed with cur (``DynSAM.gen_draft``); when the first occurrence is
  followed by fewer than ``n_predicts`` tokens the match is shortened along its suffix links to an
  earlier occurrence (``DynSAM.to_anc``).
* **A static corpus, optionally** (``static_datastore``: a REST datastore, ``lade_bench.rest_datastore``,
  built by the same command for the model's tokenizer; the authors' ``samd/sam/static_sam.py``):
  :class:`StaticMatch` follows the longest suffix of the context found in the corpus, token by token,
  on the datastore's suffix array. That is the answer the authors' ``StaticSAM`` gives (the state
  ``transfer_state`` reaches: the longest suffix of the context that is a substring of the corpus)
  and the first occurrence its ``min_endpos`` names (the smallest start among the suffix-array rows
  of the match). The two matches compete as in the authors' ``DraftModel.lookup`` (``samd/draft.py``):
  the static length less ``len_bias``; when the larger of the two reaches ``len_threshold`` the
  dynamic one drafts if it is at least the penalised static one, else the static one drafts the
  tokens after its first occurrence (``StaticSAM.gen_draft``: no move along suffix links there).
* **Token Recycling's tree otherwise** (``decoding/drafters/token_recycling.py``'s adjacency matrix and
  template, composed here, not copied), refreshed after every forward, chain or tree, and after the
  prefill (``DraftModel.update`` hands every forward's tokens and logits to the tree model). The
  default template is the authors' SAM-Decoding one (``samd/config/token_recycle.json``: 60 nodes,
  depth 5), not Token Recycling's own 80-node ``2.2.2``.
* **Verification** of the chain or tree in one forward (``draft_tree_generate``): greedy output
  exactly AR's; sampled output drawn node by node from the target's distribution.

State: the automaton is rebuilt for every request (the authors' ``DraftModel.reset`` empties the
dynamic automaton per question, and resets the static one's match); the recycling matrix persists
across a cell's requests (their ``TokenRecycle.reset`` keeps it), and so does the static corpus,
loaded once: :class:`SamState` holds both and is the method's per-cell state.

No torch import at the top: the config schema reads the defaults below without waiting for torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lade_bench.decoding.core.params import DecodingConfigError, require_int
from lade_bench.decoding.drafters.token_recycling import (
    TOKEN_RECYCLING_TOP_K,
    TREE_TEMPLATES,
    RecyclingState,
    TokenRecyclingDrafter,
    TreeTemplate,
    tree_template,
)

if TYPE_CHECKING:
    from lade_bench.decoding.core.params import DecodeResult
    from lade_bench.decoding.drafters.draft_tree import DrafterRun, DraftTree, TreeStep
    from lade_bench.rest_datastore.reader import Datastore

# The authors' defaults, stated once (the config section and the engine function read them):
# samd/samd_config.py's SamdConfig and scripts/inference_samd.sh.
SAM_N_PREDICTS = 40  # n_predicts: tokens a chain step feeds, cur included (seq_position_ids = range(n_predicts))
SAM_LEN_THRESHOLD = 5  # len_threshold: a match at least this long drafts a chain, a shorter one the tree
SAM_TOP_K = TOKEN_RECYCLING_TOP_K  # samd/draft.py and token_recycle.py: TOPK = 8 successors per token
SAM_TREE = "samd"  # samd_config.load_token_recycle's default tree_path, config/token_recycle.json
SAM_LEN_BIAS = 5  # len_bias: subtracted from the static corpus's match before it competes (samd/draft.py)
# The config key naming the static corpus: quoted in the datastore's refusals and errors.
STATIC_SETTING = "sam_decoding.static_datastore"

# The authors' fallback tree (samd/config/token_recycle.json, identical in Spec-Bench's model/samd),
# its adjacency lists turned into rank paths: node = child ranks from the root, as TREE_TEMPLATES.
SAM_TREE_TEMPLATES: dict[str, tuple[tuple[int, ...], ...]] = {
    "samd": (
        *((i,) for i in range(7)),
        *((0, i) for i in range(6)),
        *((1, i) for i in range(5)),
        (2, 0), (2, 1), (2, 2), (3, 0), (3, 1), (4, 0), (4, 1), (5, 0), (6, 0),
        (0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 2, 1), (0, 3, 0), (0, 4, 0),
        (1, 0, 0), (1, 0, 1), (1, 0, 2), (1, 1, 0), (1, 1, 1), (1, 2, 0), (1, 3, 0), (2, 0, 0), (2, 1, 0),
        (3, 0, 0), (4, 0, 0), (5, 0, 0),
        (0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 0), (0, 1, 0, 0), (1, 0, 0, 0), (1, 0, 0, 1), (1, 1, 0, 0),
        (2, 0, 0, 0),
        (0, 0, 0, 0, 0), (0, 0, 0, 0, 1), (0, 0, 1, 0, 0), (1, 0, 0, 0, 0),
    ),
}  # fmt: skip

# DecodeResult.stats keys: decode steps that verified a suffix-automaton chain / a recycling tree.
CHAIN_STEPS_STAT = "sam_chain_steps"
TREE_STEPS_STAT = "sam_tree_steps"
# ... and, of the chain steps, those drafted from the static corpus.
STATIC_STEPS_STAT = "sam_static_chain_steps"


class SuffixAutomaton:
    """The suffix automaton of a growing token sequence, extended one token at a time.

    The minimal automaton accepting every suffix of ``tokens`` (Blumer et al., "The smallest
    automaton recognizing the subwords of a text", TCS 1985; the authors' ``DynSAM.add_state``): each
    state is a class of substrings with the same end positions; ``link`` is the suffix link,
    ``length`` the longest string of the class, ``first_end`` the end index of its first occurrence.
    At most ``2 n - 1`` states for n tokens; each extension costs amortised O(1) dictionary steps.

    Attributes:
        tokens: the sequence so far.
        match_length: after the last :meth:`extend`, the longest suffix of ``tokens`` that occurs in
            ``tokens[:-1]`` (0: the newest token never occurred before).
        match_state: the state of that suffix (0, the root, when ``match_length`` is 0).
    """

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self._next: list[dict[int, int]] = [{}]
        self._link: list[int] = [-1]
        self._length: list[int] = [0]
        self._first_end: list[int] = [-1]
        self._last = 0
        self.match_length = 0
        self.match_state = 0

    @property
    def states(self) -> int:
        """States of the automaton, the root included."""
        return len(self._next)

    def extend(self, token: int) -> None:
        """Append ``token``; sets :attr:`match_length` and :attr:`match_state` for the new sequence.

        The walk up the suffix links from the previous last state stops at the longest suffix ``x``
        of the old sequence such that ``x + token`` occurs in it: ``x + token`` is then the longest
        suffix of the new sequence seen before, so the match falls out of the construction.
        """
        nxt, link, length, first_end = self._next, self._link, self._length, self._first_end
        end = len(self.tokens)
        self.tokens.append(token)
        cur = len(nxt)
        nxt.append({})
        link.append(-1)
        length.append(length[self._last] + 1)
        first_end.append(end)
        p = self._last
        while p != -1 and token not in nxt[p]:
            nxt[p][token] = cur
            p = link[p]
        self._last = cur
        if p == -1:
            link[cur] = 0
            self.match_length, self.match_state = 0, 0
            return
        q = nxt[p][token]
        if length[p] + 1 == length[q]:
            link[cur] = q
            self.match_length, self.match_state = length[q], q
            return
        # q's class splits: its strings up to length[p] + 1 (suffixes of the new sequence) move to a clone.
        clone = len(nxt)
        nxt.append(dict(nxt[q]))
        link.append(link[q])
        length.append(length[p] + 1)
        first_end.append(first_end[q])  # the new end is the sequence's last: the first occurrence is q's
        while p != -1 and nxt[p].get(token) == q:
            nxt[p][token] = clone
            p = link[p]
        link[q] = link[cur] = clone
        self.match_length, self.match_state = length[clone], clone

    def first_end(self, state: int) -> int:
        """End index in :attr:`tokens` of the first occurrence of ``state``'s strings (-1: the root)."""
        return self._first_end[state]

    def continuation(self, n_predicts: int) -> list[int]:
        """The draft after the current match: at most ``n_predicts - 1`` tokens of ``tokens[:-1]``.

        They follow the first occurrence of the match (``DynSAM.gen_draft``); while that occurrence is
        followed by fewer than ``n_predicts`` tokens of the sequence before the newest, the match is
        shortened along its suffix links (never to the root), whose first occurrence may be earlier
        (``DynSAM.to_anc``). Empty when there is no match.
        """
        state = self.match_state
        if state == 0:
            return []
        seen = len(self.tokens) - 1  # the automaton of the authors holds everything before the newest token
        while self._link[state] != 0 and n_predicts > seen - 1 - self._first_end[state]:
            state = self._link[state]
        start = self._first_end[state] + 1
        return self.tokens[start : min(start + n_predicts - 1, seen)]


class StaticMatch:
    """The longest suffix of a request's context found in a static corpus, followed token by token.

    The corpus is a REST datastore's token ids and their suffix array (``lade_bench.rest_datastore``).
    After each :meth:`extend`, :attr:`length` is the longest suffix of the context that occurs in the
    corpus, the length the authors' ``StaticSAM.transfer_state`` reaches on a suffix automaton of the
    corpus (``samd/sam/static_sam.py``): a suffix automaton and a suffix array answer "which suffixes
    of the context occur, and where" alike, and the datastore already holds the array. The match's
    rows are the suffix-array range of its occurrences; its first occurrence (the authors'
    ``min_endpos``) is the smallest start among them.

    Attributes:
        context: the tokens seen so far (the request's context).
        length: the current match's length (0: the newest token is not in the corpus).
    """

    def __init__(self, tokens: np.ndarray, suffix_array: np.ndarray) -> None:
        self.corpus = tokens
        self.suffix_array = suffix_array
        self.context: list[int] = []
        self.length = 0
        self._rows = (0, int(suffix_array.shape[0]))  # every row begins with the empty match

    def extend(self, token: int) -> None:
        """Append ``token`` to the context; :attr:`length` becomes the new longest suffix found in the corpus."""
        from lade_bench.decoding.drafters.rest import suffix_range

        self.context.append(token)
        rows = self._narrow(token)
        if rows[1] > rows[0]:  # the match grows by the token: the common case inside a copied passage
            self.length += 1
            self._rows = rows
            return
        # The new match is at most as long as the old one; occurrence is monotone in the length: bisect.
        best = (0, (0, int(self.suffix_array.shape[0])))
        low, high = 1, self.length
        while low <= high:
            span = (low + high) // 2
            found = suffix_range(self.corpus, self.suffix_array, self.context[-span:])
            if found[1] > found[0]:
                best, low = (span, found), span + 1
            else:
                high = span - 1
        self.length, self._rows = best

    def _narrow(self, token: int) -> tuple[int, int]:
        """The rows of the current match whose next corpus token is ``token`` (sorted by it: two bisections)."""
        corpus, suffix_array, offset = self.corpus, self.suffix_array, self.length
        size = corpus.shape[0]

        def key(row: int) -> int:  # a suffix that ends with the match sorts first: -1
            at = int(suffix_array[row]) + offset
            return int(corpus[at]) if at < size else -1

        lo, hi = self._rows
        while lo < hi:
            mid = (lo + hi) // 2
            if key(mid) < token:
                lo = mid + 1
            else:
                hi = mid
        start, hi = lo, self._rows[1]
        while lo < hi:
            mid = (lo + hi) // 2
            if key(mid) <= token:
                lo = mid + 1
            else:
                hi = mid
        return start, lo

    def continuation(self, n_predicts: int) -> list[int]:
        """At most ``n_predicts - 1`` corpus tokens after the match's first occurrence (``StaticSAM.gen_draft``).

        Empty without a match, or when its first occurrence ends the corpus.
        """
        if self.length == 0:
            return []
        start, end = self._rows
        after = int(np.min(self.suffix_array[start:end])) + self.length
        return [int(t) for t in self.corpus[after : after + n_predicts - 1]]


@dataclass(frozen=True)
class SamSettings:
    """SAM-Decoding's settings, checked on construction (a ``DecodingConfigError`` names the bad one).

    Attributes:
        n_predicts: most tokens a chain step feeds, cur included (at most ``n_predicts - 1`` drafted).
        len_threshold: the shortest match that drafts a chain; a shorter one drafts the fallback tree.
        top_k: successors the fallback's adjacency matrix keeps per token.
        tree: the fallback's tree template: a name in :data:`SAM_TREE_TEMPLATES` or ``TREE_TEMPLATES``
            (Token Recycling's), or a list of rank paths.
        len_bias: subtracted from the static corpus's match length before it competes with the
            dynamic one's (no effect without a static corpus).
        static_datastore: the static corpus, a REST datastore folder (``python -m
            lade_bench.rest_datastore build``), or ``reference`` (REST's reference datastore of the cell's
            tokenizer, resolved to its folder by the plan); None: none (the authors' ``NullStaticSAM``).
    """

    n_predicts: int = SAM_N_PREDICTS
    len_threshold: int = SAM_LEN_THRESHOLD
    top_k: int = SAM_TOP_K
    tree: Any = SAM_TREE
    len_bias: int = SAM_LEN_BIAS
    static_datastore: str | None = None

    def __post_init__(self) -> None:
        require_int("sam_decoding.n_predicts", self.n_predicts, minimum=2)
        require_int("sam_decoding.len_threshold", self.len_threshold, minimum=1)
        require_int("sam_decoding.len_bias", self.len_bias, minimum=0)
        path = self.static_datastore
        if path is not None and not (isinstance(path, str) and path.strip()):
            raise DecodingConfigError(
                f"{STATIC_SETTING}={path!r} is not allowed: use a datastore folder (a path), 'reference' or null"
            )
        self.template()  # checks top_k and the tree

    def template(self) -> TreeTemplate:
        """The fallback tree's validated template."""
        tree = self.tree
        if isinstance(tree, str):
            known = {**SAM_TREE_TEMPLATES, **TREE_TEMPLATES}
            if tree not in known:
                raise DecodingConfigError(
                    f"sam_decoding.tree={tree!r} is not a known template; use one of {sorted(known)} "
                    "or a list of rank paths such as [[0], [1], [0, 0]]"
                )
            tree = known[tree]
        return tree_template(tree, self.top_k, section="sam_decoding")


class SamState:
    """SAM-Decoding's per-cell state: the fallback's recycling matrix and the static corpus, if any.

    Attributes:
        recycling: the fallback's adjacency matrix (learns from every forward).
        static: the static corpus (a loaded REST datastore, read-only); None: none.
        requests_seen: requests finished with this state before the current one (warm-state protocol).
    """

    def __init__(self, top_k: int, static: Datastore | None = None) -> None:
        self.recycling = RecyclingState(top_k)
        self.static = static
        self.requests_seen = 0
        # Read once: checked against each request's model vocabulary.
        self._largest_token = -1 if static is None else int(np.max(static.tokens))

    @property
    def top_k(self) -> int:
        """Successors the recycling matrix keeps per token."""
        return self.recycling.top_k

    def size(self) -> int:
        """Rows of the recycling matrix filled (the static corpus never grows; its manifest gives its size)."""
        return self.recycling.size()

    def check(self, settings: SamSettings, model: Any) -> None:
        """Raise DecodingConfigError when this state cannot run ``settings`` on ``model``.

        Another ``top_k``, another static corpus than ``settings`` names (compared by content hash),
        or a corpus holding token ids beyond the model's vocabulary.
        """
        if self.top_k != settings.top_k:
            raise DecodingConfigError(f"a SAM-Decoding state of top_k={self.top_k} cannot run top_k={settings.top_k}")
        static, path = self.static, settings.static_datastore
        if static is None or path is None:
            if static is not None or path is not None:
                held = "none" if static is None else repr(str(static.path))
                raise DecodingConfigError(
                    f"{STATIC_SETTING}={path!r} is not the static corpus this SAM-Decoding state holds ({held})"
                )
            return
        from lade_bench.rest_datastore.reader import read_manifest

        if read_manifest(path, STATIC_SETTING)["content_hash"] != static.content_hash:
            raise DecodingConfigError(
                f"{STATIC_SETTING}={path!r} is not the static corpus this SAM-Decoding state holds "
                f"({str(static.path)!r}, another content hash)"
            )
        vocab = int(model.get_input_embeddings().num_embeddings)
        largest = self._largest_token
        if largest >= vocab:
            raise DecodingConfigError(
                f"{STATIC_SETTING}={path!r} holds token id {largest}, beyond this model's vocabulary of "
                f"{vocab}: it was built with another tokenizer ({static.manifest['tokenizer']})"
            )


def new_sam_state(settings: SamSettings) -> SamState:
    """An empty per-cell state: the fallback's matrix, ``settings.top_k`` wide, and the static corpus loaded.

    Raises:
        DatastoreError: ``settings.static_datastore`` names no datastore.
    """
    static = None
    if settings.static_datastore is not None:
        from lade_bench.rest_datastore.reader import load_datastore

        static = load_datastore(settings.static_datastore, STATIC_SETTING)
    return SamState(settings.top_k, static)


class SamDecodingDrafter:
    """The ``Drafter`` of SAM-Decoding for one request: its own automaton and static match, the cell's
    recycling matrix and static corpus."""

    def __init__(self, state: SamState, settings: SamSettings) -> None:
        self.settings = settings
        self.automaton = SuffixAutomaton()
        self.static = None if state.static is None else StaticMatch(state.static.tokens, state.static.suffix_array)
        self.recycling = TokenRecyclingDrafter(state.recycling, settings.template())
        self.chain_steps = 0
        self.static_steps = 0
        self.tree_steps = 0

    def propose(self, context: Sequence[int]) -> DraftTree:
        """A chain after the better of the two matches when it is long enough, else the tree.

        The authors' ``DraftModel.lookup`` (``samd/draft.py``): the static match competes less
        ``len_bias`` (without a static corpus its match is 0, as their ``NullStaticSAM``'s); when the
        larger reaches ``len_threshold`` the dynamic match drafts if it is at least the penalised
        static one, else the static one does.
        """
        from lade_bench.decoding.drafters.draft_tree import DraftTree

        settings, automaton, static = self.settings, self.automaton, self.static
        for token in context[len(automaton.tokens) :]:
            automaton.extend(int(token))
        dynamic = automaton.match_length
        penalised = -settings.len_bias
        if static is not None:
            for token in context[len(static.context) :]:
                static.extend(int(token))
            penalised += static.length
        if max(dynamic, penalised) >= settings.len_threshold:
            from_static = static is not None and penalised > dynamic
            source = static if static is not None and from_static else automaton
            chain = source.continuation(settings.n_predicts)
            if chain:  # the authors pad an empty continuation with zeros; the tree can do better
                self.chain_steps += 1
                self.static_steps += from_static
                return DraftTree.from_chain(int(context[-1]), chain)
        self.tree_steps += 1
        return self.recycling.propose(context)

    def observe(self, step: TreeStep) -> None:
        """The recycling matrix learns from every forward, chain or tree (``DraftModel.update``)."""
        self.recycling.observe(step)


def sam_decoding_reach(settings: SamSettings) -> Any:
    """How far a step reaches: the longer of a full chain and the fallback tree, fed with cur."""
    from lade_bench.decoding.drafters.draft_tree import draft_reach

    template = settings.template()
    return draft_reach(
        "SAM-Decoding",
        max(settings.n_predicts - 1, template.depth),
        max(settings.n_predicts, template.size + 1),
    )


def start_sam_request(state: SamState, settings: SamSettings, prompt: Sequence[int]) -> DrafterRun:
    """One request's drafter on the cell's ``state``, and what the engine calls around it.

    The prefill's logits refresh the fallback's matrix for the whole prompt (the authors'
    ``SamdModel.prefill`` hands them to ``DraftModel.update``), and every decode forward's too, the last
    included (their ``update_state`` runs before the loop stops). The fidelity test drives this.
    """
    from lade_bench.decoding.drafters.draft_tree import DrafterRun

    drafter = SamDecodingDrafter(state, settings)
    return DrafterRun(
        drafter,
        prefill_observer=drafter.recycling.prefill_observer(prompt),
        stats=lambda: {
            CHAIN_STEPS_STAT: float(drafter.chain_steps),
            TREE_STEPS_STAT: float(drafter.tree_steps),
            STATIC_STEPS_STAT: float(drafter.static_steps),
        },
    )


def sam_decoding_generate(
    model: Any,
    input_ids: Sequence[int] | Any,
    max_new_tokens: int,
    settings: SamSettings | None = None,
    *,
    state: SamState | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    seed: int = 0,
    sampling: Any = None,
) -> DecodeResult:
    """SAM-Decoding generation: greedy output exactly AR's; sampled output distributed as AR's.

    Args:
        model, input_ids, max_new_tokens, eos_token_id, seed, sampling: as ``draft_tree.run_drafter``'s.
        settings: :class:`SamSettings` (None: the defaults).
        state: the fallback's recycling matrix to use and update and the static corpus (a cell's warm
            state, the corpus loaded once); None: a fresh one (cold), the corpus loaded now. The suffix
            automaton and the static match are this request's own either way.

    Returns:
        The ``DecodeResult`` of ``draft_tree_generate``, its ``method`` ``"sam_decoding"``, with
        ``stats[CHAIN_STEPS_STAT]`` and ``stats[TREE_STEPS_STAT]`` (decode steps of each draft kind)
        and ``stats[STATIC_STEPS_STAT]`` (the chains drawn from the static corpus); the warm-state
        counters are added by the caller (``methods.use_state``).

    Raises:
        DecodingConfigError: a ``state`` of another ``top_k`` or static corpus, or a static corpus holding
            ids beyond the model's vocabulary.
        DatastoreError: ``settings.static_datastore`` names no datastore.
    """
    from lade_bench.decoding.drafters.draft_tree import run_drafter

    settings = settings or SamSettings()

    def start(state: SamState, prompt: list[int]) -> DrafterRun:
        return start_sam_request(state, settings, prompt)

    return run_drafter(
        model,
        input_ids,
        max_new_tokens,
        settings,
        state,
        method="sam_decoding",
        new_state=new_sam_state,
        start=start,
        reach=sam_decoding_reach(settings),
        eos_token_id=eos_token_id,
        seed=seed,
        sampling=sampling,
    )
