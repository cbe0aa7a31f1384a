"""Verification branch: which pooled candidates the model agrees with, greedy or sampled.

Greedy verification is the draft-tree primitive's (``tree.verify_tree_greedy``), read back as the
winning candidate and its matched length for the executors' cache commit.

Both functions return ``(accepted_tokens, winner, matched)``: the tokens this step emits, the index
of the candidate whose first ``matched`` tokens were accepted (-1 when none), so the caller can keep
exactly those entries of the KV cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from lade_bench.decoding.core.tree import tree_of_candidates, verify_tree_greedy

Verification = tuple[list[int], int, int]


def verify_greedy(
    predictions: Sequence[int],
    candidates: Sequence[Sequence[int]],
    candidate_rows: Sequence[Sequence[int]],
) -> Verification:
    """Longest candidate prefix that equals the greedy chain; ties go to the earliest candidate.

    ``predictions[r]`` is the argmax of logit row r; row 0 is cur's, so ``predictions[0]`` is the
    first token greedy decoding emits. Candidate i's token t is accepted when it equals the greedy
    token at its position, and then the argmax of its own row is the next greedy token. On a full
    match that row's argmax is a bonus token, exact because its context is entirely accepted tokens
    (the official code keeps it too: a step emits up to N tokens).

    The draft-tree primitive decides (``tree.verify_tree_greedy``): the candidates as one chain each
    under cur, every node reading its own row, so the earliest deepest matching node is the earliest
    longest candidate prefix.
    """
    tree, _ = tree_of_candidates(predictions[0], candidates, "flat")
    node_predictions = [predictions[0], *(predictions[row] for rows in candidate_rows for row in rows)]
    accepted, path = verify_tree_greedy(node_predictions, tree)
    if not path:
        return accepted, -1, 0
    # Flat chains of equal length: node k + 1 is candidate k // length's token k % length.
    return accepted, (path[-1] - 1) // len(candidates[0]), len(path)


def verify_sampling(
    probabilities_of_row: Callable[[int], torch.Tensor],
    candidates: Sequence[Sequence[int]],
    candidate_rows: Sequence[Sequence[int]],
    generator: torch.Generator,
) -> Verification:
    """Multi-draft speculative sampling with one-hot drafts (SpecInfer style); preserves the target.

    At each depth the surviving candidates' draft tokens are tried in order: draft d is accepted with
    probability p(d) under the current (residual) distribution p; on rejection p(d) is zeroed and p
    renormalised. If every draft is rejected, the token is drawn from the residual and the step ends.
    Sequential elimination of fixed drafts samples exactly from p, so the output distribution equals
    autoregressive sampling's.

    Args:
        probabilities_of_row: row index -> warped target distribution, shape (V,), on any device.
        candidates: the drafts, each N-1 tokens.
        candidate_rows: logit row of each draft token.
        generator: CPU generator used for every random draw of this step.
    """
    accepted: list[int] = []
    survivors = list(range(len(candidates)))
    distribution = probabilities_of_row(0)
    depth = 0
    depth_limit = len(candidates[0]) if candidates else 0
    while True:
        token = _accept_one_draft(distribution, [candidates[i][depth] for i in survivors], generator)
        if token is None:
            accepted.append(_draw(distribution, generator))
            break
        accepted.append(token)
        survivors = [i for i in survivors if candidates[i][depth] == token]
        distribution = probabilities_of_row(candidate_rows[survivors[0]][depth])
        depth += 1
        if depth == depth_limit:
            # Every draft token of this candidate was accepted: its last row gives a bonus token.
            accepted.append(_draw(distribution, generator))
            break
    matched = len(accepted) - 1
    return accepted, (survivors[0] if matched else -1), matched


def _accept_one_draft(distribution: torch.Tensor, drafts: list[int], generator: torch.Generator) -> int | None:
    """Try the distinct drafts in order; return the accepted one, or None (``distribution`` is then
    left as the normalised residual)."""
    if not drafts:
        return None
    tried: set[int] = set()
    for draft in drafts:
        if draft in tried:
            continue  # already rejected, its residual probability is 0
        tried.add(draft)
        p = float(distribution[draft])
        if p > 0 and float(torch.rand((), generator=generator)) < p:
            return draft
        distribution[draft] = 0.0
        distribution /= distribution.sum()
    return None


def _draw(distribution: torch.Tensor, generator: torch.Generator) -> int:
    """One sample from ``distribution`` using ``generator`` (CPU)."""
    return int(torch.multinomial(distribution.float().cpu(), 1, generator=generator))
