"""Prompt lookup decoding as a drafter on the draft-tree seam: transformers' candidate rule, our verification.

Prompt lookup (Saxena, 2023, github.com/apoorvumang/prompt-lookup-decoding) copies the tokens that
followed an earlier occurrence of the sequence's last n-gram. :func:`prompt_lookup_candidate` is
transformers' ``PromptLookupCandidateGenerator.get_candidates`` (transformers 5.x,
``generation/candidate_generator.py``) rule for rule, so a step proposes exactly the candidate
``generate(prompt_lookup_num_tokens=...)`` tries and greedy decoding takes the same number of
forwards; :class:`PromptLookupDrafter` proposes it as a chain for :func:`draft_tree.draft_tree_generate`
(eager) and the compiled loop (``static_prompt_lookup.py``) alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from lade_bench.decoding.draft_tree import DraftTree, TreeStep


def prompt_lookup_candidate(
    sequence: Sequence[int], num_tokens: int, max_ngram_size: int, stop_ids: frozenset[int], max_length: int
) -> list[int]:
    """The tokens transformers' prompt lookup proposes after ``sequence`` (empty: none).

    The longest suffix n-gram (``max_ngram_size`` down to 1) that occurs earlier in the sequence, at
    its first occurrence, proposes the up to ``num_tokens`` tokens that followed it, cut before the
    first stop id; none when the sequence is one short of ``max_length``.
    """
    length = len(sequence)
    if length + 1 >= max_length:
        return []
    for size in range(min(max_ngram_size, length - 1), 0, -1):
        suffix = list(sequence[-size:])
        for start in range(length - size + 1):
            if list(sequence[start : start + size]) != suffix:
                continue
            begin = start + size
            end = min(begin + num_tokens, length, max_length)
            if begin >= end:
                continue
            chosen = list(sequence[begin:end])
            for index, token in enumerate(chosen):
                if token in stop_ids:
                    chosen = chosen[:index]
                    break
            return chosen
    return []


class PromptLookupDrafter:
    """Proposes :func:`prompt_lookup_candidate` as a chain rooted at cur (a ``draft_tree.Drafter``); stateless."""

    def __init__(self, num_tokens: int, max_ngram_size: int, stop_ids: frozenset[int], max_length: int) -> None:
        """The rule's settings; ``max_length`` = prompt length + max_new_tokens (transformers' ``max_length``)."""
        self.num_tokens = num_tokens
        self.max_ngram_size = max_ngram_size
        self.stop_ids = stop_ids
        self.max_length = max_length

    def propose(self, context: Sequence[int]) -> DraftTree:
        """cur followed by the copied candidate (cur alone when there is none)."""
        chain = prompt_lookup_candidate(context, self.num_tokens, self.max_ngram_size, self.stop_ids, self.max_length)
        return DraftTree.from_chain(context[-1], chain)

    def observe(self, step: TreeStep) -> None:
        """Nothing to learn: the candidate depends on the sequence alone."""
