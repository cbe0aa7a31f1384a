"""SuffixDecoding: drafts read off suffix trees of the prompt, the output so far and earlier outputs.

Oliaro, Jia, Campos, Qiao, "SuffixDecoding: Extreme Speculative Decoding for Emerging AI
Applications", NeurIPS 2025, arXiv 2411.04975. The suffix trees are the authors' own, from their
``arctic-inference`` package (github.com/snowflakedb/ArcticInference, Apache-2.0:
``csrc/suffix_decoding/suffix_tree.cc``, ``arctic_inference/suffix_decoding/cache.py``), the same code
vLLM's ``method="suffix"`` runs; it builds on this CPU from its source distribution and needs neither
vLLM nor CUDA (docs/suffix_decoding.md says how it is installed). This module is the
method on the engine's draft-tree seam (``lade_bench.decoding.drafters.draft_tree``):

* **Two kinds of suffix tree**, both bounded by ``max_tree_depth`` (suffixes are cut at that depth):
  one per request over its prompt and every token emitted so far, and one global tree over the
  earlier requests' outputs, holding at most ``max_cached_requests`` of them (the oldest evicted
  first). The global tree is the method's per-cell state (:class:`SuffixDecodingState`), carried
  across a cell's requests by the warm-state protocol (``lade_bench.methods.state``).
* **Speculation**: for every suffix of the context (its last ``max_tree_depth`` tokens, cur included)
  found in a tree, the continuation is read off by frequency (a child's count over its parent's is
  the estimated probability of that token, multiplied along the path), at most
  ``max_spec_factor x match_length`` tokens (and ``max_spec_tokens``), stopping below
  ``min_token_prob``; the draft with the highest score (the sum of its tokens' probabilities) over
  both trees and every match length wins. ``use_tree_spec``: a tree of the most probable
  continuations (best-first) instead of one chain.
* **Verification** of the draft in one forward, the longest path whose every token is the argmax at
  its parent (``draft_tree_generate``): greedy output exactly AR's; with sampling, drawn node by node
  from the target's distribution, so distributed as AR sampling.

No torch and no arctic-inference import at the top: the config schema and the plan checks read the
defaults and the validation below without loading either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lade_bench.decoding.core.params import DecodingConfigError, require_int

if TYPE_CHECKING:
    from lade_bench.decoding.core.params import DecodeResult
    from lade_bench.decoding.drafters.draft_tree import DraftTree, TreeStep

# The authors' defaults, stated once (the config section, the engine function and the describe hook read
# them): those of the authors' own vLLM plugin, ArcticInference (github.com/snowflakedb/ArcticInference at
# 9d46438, the same in the arctic-inference==0.3.0 this suite builds): ``ArcticSpeculativeConfig`` in
# ``arctic_inference/vllm/config.py`` and the proposer ``propose_suffix_draft_token_ids`` in
# ``arctic_inference/vllm/model_runner.py``, run as ``speculative_config={"method": "suffix"}``.
SUFFIX_MAX_TREE_DEPTH = 64  # suffix_cache_max_depth: longest suffix a tree holds and a match uses
SUFFIX_MAX_CACHED_REQUESTS = 100_000  # suffix_cache_max_requests: earlier outputs the global tree keeps
# num_speculative_tokens: method "suffix" without suffix_speculative_tokens sets 16 ("not
# suffix_cache_max_depth which can be very large", config.py); the plugin cuts each draft to it.
SUFFIX_MAX_SPEC_TOKENS = 16
SUFFIX_MAX_SPEC_FACTOR = 1.0  # suffix_max_spec_factor: draft length <= factor x match length (offset 0.0)
SUFFIX_MIN_TOKEN_PROB = 0.1  # suffix_min_token_prob: stop drafting below this estimated probability
SUFFIX_USE_TREE_SPEC = False  # the plugin's proposer drafts one chain (it never passes use_tree_spec)
# The plugin asks speculate for up to vLLM's MAX_SPEC_LEN (vllm/v1/sample/rejection_sampler.py) tokens and
# cuts the chosen chain to num_speculative_tokens afterwards; the model-length bound it also applies is
# the engine's position limit here.
SUFFIX_SPECULATE_BUDGET = 128

# vLLM's own SuffixDecoding settings (vllm/config/speculative.py, added by the authors in vLLM PR #25784),
# the named alternative: the values every committed SuffixDecoding cell before issue 65 ran.
VLLM_SUFFIX_MAX_TREE_DEPTH = 24  # suffix_decoding_max_tree_depth
VLLM_SUFFIX_MAX_CACHED_REQUESTS = 10_000  # suffix_decoding_max_cached_requests
VLLM_SUFFIX_MAX_SPEC_TOKENS = 24  # num_speculative_tokens: vLLM defaults it to the tree depth


@dataclass(frozen=True)
class SuffixSettings:
    """SuffixDecoding's settings, checked on construction (a ``DecodingConfigError`` names the bad one).

    Attributes:
        max_tree_depth: suffixes longer than this are cut in both trees; the context's last this many
            tokens are matched.
        max_spec_tokens: most draft tokens per step (a tree's nodes below cur, or a chain's length: a
            chain is chosen under ``SUFFIX_SPECULATE_BUDGET`` and cut to this, as the plugin does).
        max_cached_requests: earlier outputs the global tree holds (oldest evicted first); 0: no
            global tree (only the request's own prompt and output are matched).
        max_spec_factor: a match of length m drafts at most ``max_spec_factor * m`` tokens.
        min_token_prob: drafting stops at a token whose estimated probability is below this.
        use_tree_spec: draft a tree of the most probable continuations instead of one chain.
    """

    max_tree_depth: int = SUFFIX_MAX_TREE_DEPTH
    max_spec_tokens: int = SUFFIX_MAX_SPEC_TOKENS
    max_cached_requests: int = SUFFIX_MAX_CACHED_REQUESTS
    max_spec_factor: float = SUFFIX_MAX_SPEC_FACTOR
    min_token_prob: float = SUFFIX_MIN_TOKEN_PROB
    use_tree_spec: bool = SUFFIX_USE_TREE_SPEC

    def __post_init__(self) -> None:
        require_int("suffix_decoding.max_tree_depth", self.max_tree_depth, minimum=1)
        require_int("suffix_decoding.max_spec_tokens", self.max_spec_tokens, minimum=1)
        require_int("suffix_decoding.max_cached_requests", self.max_cached_requests, minimum=0)
        if self.max_cached_requests > _MAX_SEQUENCE_ID:
            raise DecodingConfigError(
                f"suffix_decoding.max_cached_requests={self.max_cached_requests!r} is not allowed: "
                f"use an integer in [0, {_MAX_SEQUENCE_ID}] (the suffix tree numbers sequences in int32)"
            )
        factor, prob = self.max_spec_factor, self.min_token_prob
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 0:
            raise DecodingConfigError(f"suffix_decoding.max_spec_factor={factor!r} is not allowed: use a number >= 0")
        if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0 <= prob <= 1:
            raise DecodingConfigError(f"suffix_decoding.min_token_prob={prob!r} is not allowed: use a number in [0, 1]")
        if not isinstance(self.use_tree_spec, bool):
            raise DecodingConfigError(
                f"suffix_decoding.use_tree_spec={self.use_tree_spec!r} is not allowed: use true or false"
            )


# The C++ tree keys sequences by int32 ids (``SuffixDecodingCache`` refuses more cached requests).
_MAX_SEQUENCE_ID = 0x7FFFFFFF


class SuffixDecodingState:
    """The persistent part of SuffixDecoding: the authors' cache, its global tree kept across requests.

    One ``arctic_inference.suffix_decoding.SuffixDecodingCache`` holds the global tree (the outputs of
    the requests so far, at most ``max_cached_requests``, oldest evicted first) and, while a request
    runs, that request's own tree over its prompt and output.

    Attributes:
        max_tree_depth: the trees' depth bound.
        max_cached_requests: the global tree's bound, in requests.
        requests_seen: requests finished with this state before the current one (warm-state protocol).
        cache: the ``SuffixDecodingCache``.
    """

    def __init__(
        self, max_tree_depth: int = SUFFIX_MAX_TREE_DEPTH, max_cached_requests: int = SUFFIX_MAX_CACHED_REQUESTS
    ) -> None:
        from arctic_inference.suffix_decoding import SuffixDecodingCache

        self.max_tree_depth = max_tree_depth
        self.max_cached_requests = max_cached_requests
        self.requests_seen = 0
        self.cache = SuffixDecodingCache(max_tree_depth=max_tree_depth, max_cached_requests=max_cached_requests)
        self._next_request = 0
        self._output_lengths: dict[int, int] = {}  # request id -> output tokens given to the global tree

    def size(self) -> int:
        """Output tokens the global tree holds (of the requests it still caches): what a match can use."""
        cached = set(self.cache.cached_requests)
        self._output_lengths = {req: n for req, n in self._output_lengths.items() if req in cached}
        return sum(self._output_lengths.values())

    def cached_requests(self) -> list[int]:
        """Ids of the requests whose outputs the global tree holds, oldest first."""
        return list(self.cache.cached_requests)

    def start(self, prompt: Sequence[int]) -> int:
        """Open a request over ``prompt`` (its own tree); the id :meth:`extend`, :meth:`speculate`, :meth:`stop` take.

        The global tree gets a slot for this request's output, evicting the oldest cached one when full.
        """
        request = self._next_request
        self._next_request += 1
        self.cache.start_request(request, [int(t) for t in prompt])
        if self.max_cached_requests:
            self._output_lengths[request] = 0
        return request

    def extend(self, request: int, tokens: Sequence[int]) -> None:
        """Append output tokens of ``request`` to its own tree and to its slot of the global tree."""
        if not tokens:
            return
        self.cache.add_active_response(request, [int(t) for t in tokens])
        if request in self._output_lengths:
            self._output_lengths[request] += len(tokens)

    def speculate(self, request: int, context: Sequence[int], settings: SuffixSettings) -> Any:
        """The authors' draft (a ``SuffixDecodingDraft``: token_ids, parents, probs, score, match_len)
        continuing ``context``: the better-scored of the request's tree and the global tree, called as
        ArcticInference's ``propose_suffix_draft_token_ids`` calls it (a chain cut to ``max_spec_tokens``)."""
        pattern = [int(t) for t in context[-self.max_tree_depth :]]
        # A chain is asked for as the plugin's proposer asks (up to vLLM's MAX_SPEC_LEN) and cut to the
        # width afterwards: the best-scored match over every length can differ from the one chosen under
        # a budget of the width itself. A tree (the paper's; neither proposer drafts one) is budgeted.
        budget = settings.max_spec_tokens if settings.use_tree_spec else SUFFIX_SPECULATE_BUDGET
        draft = self.cache.speculate(
            request,
            pattern,
            max_spec_tokens=max(budget, settings.max_spec_tokens),
            max_spec_factor=float(settings.max_spec_factor),
            min_token_prob=float(settings.min_token_prob),
            use_tree_spec=settings.use_tree_spec,
        )
        width = settings.max_spec_tokens
        if len(draft.token_ids) > width:
            draft.token_ids, draft.parents, draft.probs = (
                draft.token_ids[:width],
                draft.parents[:width],
                draft.probs[:width],
            )
        return draft

    def stop(self, request: int) -> None:
        """Close ``request``: its own tree is dropped, its output stays in the global tree."""
        self.cache.stop_request(request)

    def check(self, settings: SuffixSettings, model: Any = None) -> None:
        """Raise DecodingConfigError when ``settings`` bound the trees otherwise than this state does (any model)."""
        mine = (self.max_tree_depth, self.max_cached_requests)
        theirs = (settings.max_tree_depth, settings.max_cached_requests)
        if mine != theirs:
            raise DecodingConfigError(
                f"a SuffixDecoding state of (max_tree_depth, max_cached_requests)={mine} cannot run {theirs}: "
                "a state serves the settings it was built with"
            )


def new_suffix_state(settings: SuffixSettings) -> SuffixDecodingState:
    """An empty state bounded as ``settings`` say."""
    return SuffixDecodingState(settings.max_tree_depth, settings.max_cached_requests)


def draft_tree_of(cur: int, token_ids: Sequence[int], parents: Sequence[int]) -> DraftTree:
    """The seam's tree of one of the authors' drafts: cur at the root, their roots (parent -1) under it."""
    from lade_bench.decoding.drafters.draft_tree import DraftTree

    return DraftTree((int(cur), *(int(t) for t in token_ids)), (-1, *(int(p) + 1 for p in parents)))


class SuffixDecodingDrafter:
    """The ``Drafter`` of SuffixDecoding for one request: its trees learn every emitted token.

    The context ``propose`` receives is the prompt plus every token emitted so far, so the tokens
    since the last call are exactly what the request's output gained (a step's accepted tokens cut
    at a stop id and the budget): they go into both trees before matching, as vLLM's proposer adds
    each step's sampled tokens before speculating.
    """

    def __init__(self, state: SuffixDecodingState, settings: SuffixSettings, prompt: Sequence[int]) -> None:
        self.state = state
        self.settings = settings
        self.request = state.start(prompt)
        self._known = len(prompt)  # context tokens already in the trees

    def propose(self, context: Sequence[int]) -> DraftTree:
        """The best-scored continuation of the context's suffix, rooted at ``context[-1]``."""
        self.learn(context)
        draft = self.state.speculate(self.request, context, self.settings)
        return draft_tree_of(context[-1], draft.token_ids, draft.parents)

    def observe(self, step: TreeStep) -> None:
        """Nothing: the step's emitted tokens arrive in the next context (``step.accepted`` is not cut yet)."""

    def learn(self, context: Sequence[int]) -> None:
        """Add the context's tokens past those already known to the request's output."""
        self.state.extend(self.request, context[self._known :])
        self._known = len(context)

    def close(self, context: Sequence[int]) -> None:
        """End the request with its whole output learnt (the last step's tokens included)."""
        self.learn(context)
        self.state.stop(self.request)


def suffix_decoding_reach(settings: SuffixSettings) -> Any:
    """How far a step reaches: at most ``max_spec_tokens`` draft tokens past cur, fed with cur.

    A chain (the default) is fed in order as a plain causal block; a tree needs the tree mask.
    """
    from lade_bench.decoding.drafters.draft_tree import draft_reach

    return draft_reach(
        "SuffixDecoding",
        settings.max_spec_tokens,
        settings.max_spec_tokens + 1,
        chains_only=not settings.use_tree_spec,
    )


def suffix_decoding_generate(
    model: Any,
    input_ids: Sequence[int] | Any,
    max_new_tokens: int,
    settings: SuffixSettings | None = None,
    *,
    state: SuffixDecodingState | None = None,
    eos_token_id: int | Sequence[int] | None = None,
    seed: int = 0,
    sampling: Any = None,
) -> DecodeResult:
    """SuffixDecoding generation: greedy output exactly AR's; sampled output distributed as AR's.

    Args:
        model, input_ids, max_new_tokens, eos_token_id, seed, sampling: as ``draft_tree.run_drafter``'s.
        settings: :class:`SuffixSettings` (None: the defaults).
        state: the persistent global tree to use and extend (a cell's warm state); None: a fresh one
            (cold: only this request's own prompt and output are matched).

    Returns:
        The ``DecodeResult`` of ``draft_tree_generate``, its ``method`` ``"suffix_decoding"``; the
        warm-state counters are added by the caller (``methods.use_state``).

    Raises:
        DecodingConfigError: a ``state`` bounded otherwise than the settings say.
    """
    from lade_bench.decoding.drafters.draft_tree import DrafterRun, run_drafter

    settings = settings or SuffixSettings()

    def start(state: SuffixDecodingState, prompt: list[int]) -> DrafterRun:
        drafter = SuffixDecodingDrafter(state, settings, prompt)
        # A failed generation still closes its request (the state serves the cell's next one).
        return DrafterRun(drafter, close=drafter.close)

    return run_drafter(
        model,
        input_ids,
        max_new_tokens,
        settings,
        state,
        method="suffix_decoding",
        new_state=new_suffix_state,
        start=start,
        reach=suffix_decoding_reach(settings),
        eos_token_id=eos_token_id,
        seed=seed,
        sampling=sampling,
    )
