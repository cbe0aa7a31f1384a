"""REST: drafts retrieved from a datastore by the context's longest suffix, verified as one token tree.

He, Zhong, Lee, Zhang, Liang, "REST: Retrieval-Based Speculative Decoding", NAACL 2024, arXiv
2311.08252; the authors' code is github.com/FasterDecoding/REST (Apache-2.0): the retrieval and the
draft trie in ``DraftRetriever/src/lib.rs`` (``Reader.search``), the loop in ``rest/model/utils.py``
(``generate_candidates_and_draft_buffer``) and ``human_eval/rest_test.py``; Spec-Bench runs the same
code (``evaluation/inference_rest.py``). This module is our own implementation on the engine's
draft-tree seam (``lade_bench.decoding.drafters.draft_tree``), over the datastore of
``lade_bench.rest_datastore`` (token ids and their suffix array):

* **Retrieval.** The context ends with cur (the newest emitted token, as the authors' suffix ends
  with the token just picked from the logits). The longest suffix of it, ``max_token_span`` tokens
  down to 2, that occurs in the datastore is looked up by binary search on the suffix array; up to
  ``max_matches`` of its occurrences (in suffix-array order, as ``Reader.search`` reads them) give
  the ``draft_length`` tokens that follow each. Occurrence is monotone in the span (a longer suffix
  found implies every shorter one is), so the longest is found by bisecting the span: the authors'
  descending loop with fewer searches, the same span.
* **The trie, pruned by frequency** (``tree_budget``). Every prefix of a continuation is a node
  counted by the continuations that share it; the ``num_draft`` most frequent nodes are ranked in
  (ties: the shallower, then the earlier in suffix-array order; a parent is at least as frequent as
  its children and wins ties by depth, so they always form a trie). At ``cut_to_choices`` (the
  default, the authors' rule: ``Reader.search`` keeps the top ``choices`` nodes by count in a heap,
  then its ``cut_to_choices`` drops whole paths, those with the most distinct tokens first, until the
  kept paths' distinct-token counts sum to at most ``choices``) ``num_draft`` budgets that sum, so
  64 gives trees of about 20-30 nodes; at ``most_frequent_nodes`` (ours before issue 65) all
  ``num_draft`` ranked nodes are drafted. The two rules differ in what ``num_draft`` budgets, not
  only in ties. The authors' heap and cut order ties by Rust's randomly seeded ``HashMap``; ours
  break them deterministically (above, and in :func:`cut_to_choices`), so a tie-free query drafts
  their tree exactly and a tied one drafts one of the trees theirs can draft
  (``tests/decoding/test_rest_fidelity.py`` against ``draftretriever`` 0.1.1).
* **Verification** of the tree in one forward (``draft_tree_generate``): greedy output is exactly
  AR's; with sampling each token is drawn from the target given the accepted prefix, so output is
  distributed as AR sampling.
* **No match** (``no_match_guess``). When no suffix retrieves anything, the authors'
  ``generate_candidates_and_draft_buffer`` (``rest/model/utils.py`` at 50a5fc1, the same in
  Spec-Bench's ``model/rest`` at fd2c1cd) feeds a fixed guess, token id 100 (``random_index = 100``):
  a two-token step ``[cur, 100]``. That is the default; it is a draft like any other (verified as
  above, so greedy output stays AR's and sampling keeps its distribution) and costs a 2-token
  forward. ``null`` is ours before issue 65: a step of cur alone (one token, as AR).

Retrieval time (suffix search and trie) is measured per generation and returned as
``stats["retrieval_s"]``, inside the wall time. The datastore is static: loaded once per cell into a
:class:`RestState` (the warm-state protocol carries it; nothing at module scope).

No torch import at the top: the config schema and the plan checks read the defaults and the
validation below without loading it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lade_bench.decoding.core.params import DecodingConfigError, require_int
from lade_bench.rest_datastore.reader import REFERENCE

if TYPE_CHECKING:
    from lade_bench.decoding.core.params import DecodeResult
    from lade_bench.decoding.drafters.draft_tree import DraftTree, TreeStep
    from lade_bench.rest_datastore.reader import Datastore

# The authors' defaults, stated once (the config section and the engine function read them).
REST_MAX_TOKEN_SPAN = 16  # human_eval/rest_test.py and Spec-Bench's inference_rest.py: --max-token-span 16
REST_MIN_TOKEN_SPAN = 2  # both: token_spans = range(2, max_token_span + 1), longest first
REST_NUM_DRAFT = 64  # both: --num-draft 64, the draft tokens the trie keeps (Reader.search's `choices`)
REST_MAX_MATCHES = 5000  # DraftRetriever/src/lib.rs Reader.search: k.unwrap_or(5000) occurrences read
REST_DRAFT_LENGTH = 10  # DraftRetriever/src/lib.rs Reader.search: long.unwrap_or(10) tokens after each
# What num_draft budgets: the authors' Reader.search ends with cut_to_choices (the summed distinct-token
# lengths of the kept paths <= choices); ours before issue 65 kept num_draft nodes (a named setting now).
CUT_TO_CHOICES = "cut_to_choices"
MOST_FREQUENT_NODES = "most_frequent_nodes"
TREE_BUDGETS = (CUT_TO_CHOICES, MOST_FREQUENT_NODES)
REST_TREE_BUDGET = CUT_TO_CHOICES
# rest/model/utils.py generate_candidates_and_draft_buffer: `random_index = 100` is fed after cur when no
# span retrieves anything (ours before issue 65 fed cur alone: no_match_guess=null).
REST_NO_MATCH_GUESS = 100
# The authors require a datastore path; ours defaults to the reference datastore (the word REFERENCE:
# Python's standard library, built by scripts/setup.sh), so a cell, bench and gpu_check run REST unnamed.
REST_DATASTORE = REFERENCE

RETRIEVAL_STAT = "retrieval_s"


@dataclass(frozen=True)
class RestSettings:
    """REST's settings (the config section ``rest``), checked on construction.

    Attributes:
        datastore: ``reference`` (the default): the reference datastore of the cell's tokenizer in the
            model cache, resolved by ``rest_datastore.reference.resolve_datastore`` before the engine sees it;
            else a datastore folder (built by ``python -m lade_bench.rest_datastore build``); None: not
            set (the plan refuses the cell and says how to build one).
        max_token_span: the longest context suffix looked up (down to 2 tokens).
        num_draft: the draft budget per step, read as ``tree_budget`` says.
        max_matches: occurrences of the suffix read per retrieval.
        draft_length: tokens read after each occurrence (the trie's depth).
        tree_budget: what ``num_draft`` budgets: ``cut_to_choices`` (the authors' ``Reader.search``:
            the ``num_draft`` most frequent nodes, then the paths with the most distinct tokens dropped
            until the kept paths' distinct-token counts sum to at most ``num_draft``) or
            ``most_frequent_nodes`` (ours before issue 65: the ``num_draft`` most frequent nodes, all
            drafted; wider steps at about the same acceptance, docs/rest.md).
        no_match_guess: the token id drafted after cur when no suffix retrieves anything (the authors'
            fixed guess, 100: a two-token step); None: no draft, a step of cur alone (ours before
            issue 65). Checked against the model's vocabulary when the model is known.
        leak_outputs: the model's own outputs on the cell's questions, for the plan's leak check only
            (``rest_datastore.leak``: a datastore holding a 16-token span of one is refused): a results
            folder (a finished cell's rows) or a JSONL file, or a list of them; None: none given. Not
            part of the cell id, and the engine never reads it.
    """

    datastore: str | None = REST_DATASTORE
    max_token_span: int = REST_MAX_TOKEN_SPAN
    num_draft: int = REST_NUM_DRAFT
    max_matches: int = REST_MAX_MATCHES
    draft_length: int = REST_DRAFT_LENGTH
    tree_budget: str = REST_TREE_BUDGET
    no_match_guess: int | None = REST_NO_MATCH_GUESS
    leak_outputs: Any = None

    def __post_init__(self) -> None:
        require_int("rest.max_token_span", self.max_token_span, minimum=REST_MIN_TOKEN_SPAN)
        require_int("rest.num_draft", self.num_draft, minimum=1)
        require_int("rest.max_matches", self.max_matches, minimum=1)
        require_int("rest.draft_length", self.draft_length, minimum=1)
        if self.tree_budget not in TREE_BUDGETS:
            raise DecodingConfigError(
                f"rest.tree_budget={self.tree_budget!r} is not allowed: use {CUT_TO_CHOICES} (the authors' rule: "
                f"num_draft bounds the kept paths' summed lengths) or {MOST_FREQUENT_NODES} (num_draft nodes)"
            )
        guess = self.no_match_guess
        if guess is not None and (isinstance(guess, bool) or not isinstance(guess, int) or guess < 0):
            raise DecodingConfigError(
                f"rest.no_match_guess={guess!r} is not allowed: use a token id >= 0 (the authors' guess is "
                f"{REST_NO_MATCH_GUESS}) or null (no draft when nothing is retrieved)"
            )
        if self.datastore is not None and not (isinstance(self.datastore, str) and self.datastore.strip()):
            raise DecodingConfigError(
                f"rest.datastore={self.datastore!r} is not allowed: use a datastore folder (a path) or null"
            )
        outputs = self.leak_outputs
        listed = [outputs] if isinstance(outputs, str) else outputs
        if outputs is not None and not (
            isinstance(listed, Sequence) and all(isinstance(o, str) and o.strip() for o in listed)
        ):
            raise DecodingConfigError(
                f"rest.leak_outputs={outputs!r} is not allowed: use a results folder or a JSONL file of the "
                "model's outputs, a list of them, or null"
            )

    def leak_output_paths(self) -> tuple[str, ...]:
        """The ``leak_outputs`` sources as a tuple of paths (empty: none given)."""
        outputs = self.leak_outputs
        return () if outputs is None else (outputs,) if isinstance(outputs, str) else tuple(outputs)


class RestState:
    """A loaded datastore, kept for a cell's requests (static: retrieval never changes it).

    Attributes:
        datastore: the loaded ``rest_datastore.reader.Datastore``.
        max_token: the largest token id it holds (checked against a model's vocabulary).
        requests_seen: requests run with it before the current one (warm-state protocol).
    """

    def __init__(self, datastore: Datastore) -> None:
        self.datastore = datastore
        self.max_token = int(datastore.tokens.max())
        self.requests_seen = 0

    def size(self) -> int:
        """Tokens the datastore holds."""
        return self.datastore.size()

    def check(self, settings: RestSettings, model: Any) -> None:
        """Raise DecodingConfigError when the datastore holds ids the model's vocabulary lacks, or
        ``settings.no_match_guess`` is not one of its ids (the state is the datastore the caller loaded)."""
        vocab = int(model.get_input_embeddings().num_embeddings)
        guess = settings.no_match_guess
        if guess is not None and guess >= vocab:
            raise DecodingConfigError(
                f"rest.no_match_guess={guess} is not allowed for this model: use a token id below its vocabulary "
                f"of {vocab}, or null (no draft when nothing is retrieved)"
            )
        if self.max_token >= vocab:
            raise DecodingConfigError(
                f"rest.datastore={str(self.datastore.path)!r} holds token id {self.max_token}, beyond this model's "
                f"vocabulary of {vocab}: it was built with another tokenizer ({self.datastore.manifest['tokenizer']})"
            )


def new_rest_state(settings: RestSettings) -> RestState:
    """The datastore folder ``settings`` name, loaded (raises DatastoreError when it is missing, or is the
    unresolved word ``reference``: ``methods.drafters.rest.resolve_rest`` resolves it for a cell)."""
    from lade_bench.rest_datastore.reader import DatastoreError, build_command, load_datastore, unresolved_reference

    if settings.datastore is None:
        raise DatastoreError(
            f"rest.datastore is not set: build one with {build_command()} and pass rest.datastore=PATH"
        )
    # The word `reference` is resolved by the caller (it knows the model): here it can only be refused.
    if settings.datastore == REFERENCE:
        raise unresolved_reference()
    return RestState(load_datastore(settings.datastore))


def suffix_range(tokens: np.ndarray, suffix_array: np.ndarray, pattern: Sequence[int]) -> tuple[int, int]:
    """The suffix-array rows ``[start, end)`` whose suffixes begin with ``pattern`` (empty: ``start == end``)."""
    m = len(pattern)
    target = list(pattern)
    lo, hi = 0, len(suffix_array)
    while lo < hi:  # first suffix >= pattern
        mid = (lo + hi) // 2
        at = int(suffix_array[mid])
        if tokens[at : at + m].tolist() < target:
            lo = mid + 1
        else:
            hi = mid
    start, hi = lo, len(suffix_array)
    while lo < hi:  # first suffix past every one beginning with pattern
        mid = (lo + hi) // 2
        at = int(suffix_array[mid])
        if tokens[at : at + m].tolist() <= target:
            lo = mid + 1
        else:
            hi = mid
    return start, lo


def longest_match(
    tokens: np.ndarray, suffix_array: np.ndarray, context: Sequence[int], max_span: int
) -> tuple[int, int, int]:
    """``(span, start, end)``: the longest suffix of ``context`` (2..max_span tokens) in the datastore and its rows.

    ``span == 0`` when not even the last two tokens occur.
    """
    best = (0, 0, 0)
    low, high = REST_MIN_TOKEN_SPAN, min(max_span, len(context))
    while low <= high:  # occurrence is monotone in the span: bisect for the longest that occurs
        span = (low + high) // 2
        start, end = suffix_range(tokens, suffix_array, context[-span:])
        if end > start:
            best = (span, start, end)
            low = span + 1
        else:
            high = span - 1
    return best


def continuations(
    tokens: np.ndarray, suffix_array: np.ndarray, start: int, end: int, span: int, max_matches: int, length: int
) -> np.ndarray:
    """(n, length) int64: the tokens after the first ``max_matches`` occurrences; -1 past the datastore's end.

    The rows come in suffix-array order, which sorts them lexicographically (the matched span is
    their common prefix).
    """
    positions = np.asarray(suffix_array[start : min(end, start + max_matches)], dtype=np.int64) + span
    index = positions[:, None] + np.arange(length, dtype=np.int64)[None, :]
    inside = index < tokens.shape[0]
    rows = np.asarray(tokens[np.minimum(index, tokens.shape[0] - 1)], dtype=np.int64)
    return np.where(inside, rows, -1)


def frequent_trie(rows: np.ndarray, budget: int) -> tuple[list[int], list[int]]:
    """The ``budget`` most frequent prefixes of the sorted ``rows`` as a trie: (tokens, parents) below a root.

    A node is a prefix shared by a run of consecutive rows (they are sorted); its count is the run's
    length. Parents index the returned lists, -1 for the root (cur); parents come before children.
    """
    n, length = rows.shape
    if n == 0 or budget <= 0:
        return [], []
    differs = rows[1:] != rows[:-1]
    first_diff = np.where(differs.any(axis=1), differs.argmax(axis=1), length)
    opens = np.concatenate([[-1], first_diff])  # row i opens a new node at every depth >= opens[i]
    depth_parts, start_parts, count_parts = [], [], []
    for depth in range(length):
        starts = np.flatnonzero(opens <= depth)
        keep = rows[starts, depth] >= 0  # -1: past the datastore's end
        counts = np.diff(np.append(starts, n))
        depth_parts.append(np.full(int(keep.sum()), depth))
        start_parts.append(starts[keep])
        count_parts.append(counts[keep])
    depths, starts, counts = (np.concatenate(p) for p in (depth_parts, start_parts, count_parts))
    # Most frequent first; ties: shallower, then earlier. A parent never ranks after its child.
    chosen = np.lexsort((starts, depths, -counts))[:budget]
    order = chosen[np.lexsort((starts[chosen], depths[chosen]))]
    index: dict[tuple[int, int], int] = {}
    out_tokens: list[int] = []
    parents: list[int] = []
    kept_starts: dict[int, list[int]] = {}
    for node in order:
        depth, begin = int(depths[node]), int(starts[node])
        if depth == 0:
            parent = -1
        else:
            # The parent run holds this one's first row: the last kept start at depth - 1 not after it.
            above = kept_starts[depth - 1]
            parent = index[(depth - 1, above[int(np.searchsorted(above, begin, side="right")) - 1])]
        index[(depth, begin)] = len(out_tokens)
        kept_starts.setdefault(depth, []).append(begin)
        out_tokens.append(int(rows[begin, depth]))
        parents.append(parent)
    return out_tokens, parents


def cut_to_choices(tokens: list[int], parents: list[int], budget: int) -> tuple[list[int], list[int]]:
    """The trie ``(tokens, parents)`` (parents before children, -1: the root) cut as the authors' ``cut_to_choices``.

    DraftRetriever's ``src/lib.rs`` (FasterDecoding/REST 50a5fc1, Spec-Bench fd2c1cd, PyPI
    ``draftretriever`` 0.1.1) treats each node it kept as a path from the root and scores it by the
    number of DISTINCT token ids on it (a ``HashSet``: its length unless a token repeats); it drops paths
    in descending score until the kept scores sum to at most ``budget`` (``choices``), and drafts the
    kept paths' prefixes. Their sort is stable over a randomly ordered ``HashSet``, so equal scores
    are dropped in an arbitrary order; ours drops the deeper first, then the later in the trie's order
    (a child scores at least its parent and goes first on a tie by depth, so what is kept is
    prefix-closed and the authors' prefixes add nothing: one of the orders theirs can take), and keeps
    the input's order.
    """
    scores: list[int] = []
    depths: list[int] = []
    seen: list[frozenset[int]] = []
    for token, parent in zip(tokens, parents, strict=True):
        above = seen[parent] if parent >= 0 else frozenset()
        seen.append(above | {token})
        scores.append(len(seen[-1]))
        depths.append(depths[parent] + 1 if parent >= 0 else 1)
    total = sum(scores)
    dropped: set[int] = set()
    for node in sorted(range(len(tokens)), key=lambda i: (-scores[i], -depths[i], -i)):
        if total <= budget:
            break
        total -= scores[node]
        dropped.add(node)
    new_index: dict[int, int] = {}
    out_tokens: list[int] = []
    out_parents: list[int] = []
    for node, (token, parent) in enumerate(zip(tokens, parents, strict=True)):
        if node in dropped:
            continue
        new_index[node] = len(out_tokens)
        out_tokens.append(token)
        out_parents.append(new_index[parent] if parent >= 0 else -1)
    return out_tokens, out_parents


class RestDrafter:
    """The ``Drafter`` of REST for one request: retrieval from a static datastore, no learning.

    Attributes:
        retrieval_s: seconds spent retrieving and building trees in this request.
    """

    def __init__(self, state: RestState, settings: RestSettings) -> None:
        self.tokens = state.datastore.tokens
        self.suffix_array = state.datastore.suffix_array
        self.settings = settings
        self.retrieval_s = 0.0

    def propose(self, context: Sequence[int]) -> DraftTree:
        """The frequency-pruned trie of the continuations of the context's longest retrieved suffix, cut to
        ``tree_budget``'s budget; when nothing is retrieved, ``no_match_guess`` alone (or cur alone)."""
        from lade_bench.decoding.drafters.draft_tree import DraftTree

        started = time.perf_counter()
        settings = self.settings
        span, start, end = longest_match(self.tokens, self.suffix_array, context, settings.max_token_span)
        tokens: list[int] = []
        parents: list[int] = []
        if span:
            rows = continuations(
                self.tokens, self.suffix_array, start, end, span, settings.max_matches, settings.draft_length
            )
            tokens, parents = frequent_trie(rows, settings.num_draft)
            if settings.tree_budget == CUT_TO_CHOICES:
                tokens, parents = cut_to_choices(tokens, parents, settings.num_draft)
        if not tokens and settings.no_match_guess is not None:
            # The authors' miss: one guessed token after cur (mask [[1,0],[1,1]], retrieve_indices [[0,1]]).
            tokens, parents = [settings.no_match_guess], [-1]
        self.retrieval_s += time.perf_counter() - started
        return DraftTree((int(context[-1]), *tokens), (-1, *(p + 1 for p in parents)))

    def observe(self, step: TreeStep) -> None:
        """Nothing: the datastore is static."""


def rest_reach(settings: RestSettings) -> Any:
    """How far a step reaches: a tree at most ``draft_length`` deep with ``num_draft`` nodes below cur."""
    from lade_bench.decoding.drafters.draft_tree import draft_reach

    return draft_reach("REST", settings.draft_length, settings.num_draft + 1)


def rest_generate(
    model: Any,
    input_ids: Sequence[int] | Any,
    max_new_tokens: int,
    settings: RestSettings | None = None,
    *,
    state: RestState | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    seed: int = 0,
    sampling: Any = None,
) -> DecodeResult:
    """REST generation: greedy output exactly AR's; sampled output distributed as AR's.

    Args:
        model, input_ids, max_new_tokens, eos_token_id, seed, sampling: as ``draft_tree.run_drafter``'s.
        settings: :class:`RestSettings` (None: the defaults; ``leak_outputs`` is read by the plan's leak
            check, never here).
        state: the loaded datastore (a cell's, loaded once); None: load ``settings.datastore``.

    Returns:
        The ``DecodeResult`` of ``draft_tree_generate``, ``method`` ``"rest"``, with
        ``stats["retrieval_s"]`` (inside ``wall_time_s``).

    Raises:
        DecodingConfigError: a datastore holding ids beyond the model's vocabulary.
        DatastoreError: no datastore given, or none at the path.
    """
    from lade_bench.decoding.drafters.draft_tree import DrafterRun, run_drafter

    # A direct call names its datastore: without settings, none (the word `reference` needs the cell's model).
    settings = settings or RestSettings(datastore=None)

    def start(state: RestState, prompt: list[int]) -> DrafterRun:
        drafter = RestDrafter(state, settings)
        return DrafterRun(drafter, stats=lambda: {RETRIEVAL_STAT: drafter.retrieval_s})

    return run_drafter(
        model,
        input_ids,
        max_new_tokens,
        settings,
        state,
        method="rest",
        new_state=new_rest_state,
        start=start,
        reach=rest_reach(settings),
        eos_token_id=eos_token_id,
        seed=seed,
        sampling=sampling,
    )
