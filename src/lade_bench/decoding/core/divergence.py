"""Where a greedy output first leaves the AR output, and how close to a tie the two tokens were there.

In half precision a lookahead step computes its logits with other kernels and shapes than AR's
one-token step, so at a near-tie the argmax can legitimately differ; a real engine bug picks a token
far below AR's. :func:`divergence_margins` tells the two apart after the fact, outside any timed
region: one forward of the prompt plus the tokens both outputs share gives the logits at the first
divergent position, and from them AR's lead over the runner-up and the gap between AR's token and the
other output's token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lade_bench.decoding.core.timing import model_device


@dataclass(frozen=True)
class Divergence:
    """The first position where an output differs from AR's, and the logit margins there.

    Attributes:
        index: 0-based output position of the first differing token.
        ar_token: AR's token there (None when AR's output ended before it).
        other_token: the other output's token there (None when it ended before it).
        ar_margin: logit of AR's token minus the best other logit (AR's top-1/top-2 margin; negative
            when the reference forward itself ranks another token first). NaN without both tokens.
        other_margin: logit of AR's token minus logit of the other output's token: how far below
            AR's choice the other token sits (equals ``ar_margin`` when it is the runner-up; <= 0
            when the reference forward prefers the other token). NaN without both tokens.
    """

    index: int
    ar_token: int | None
    other_token: int | None
    ar_margin: float
    other_margin: float

    def exceeds(self, tolerance: float) -> bool:
        """True when the other token sits more than ``tolerance`` logits below AR's (not a near-tie)."""
        return not math.isnan(self.other_margin) and self.other_margin > tolerance


def first_divergence(reference: Sequence[int], other: Sequence[int]) -> int | None:
    """Index of the first position where the two id sequences differ (or one ends); None if equal."""
    for index, (a, b) in enumerate(zip(reference, other, strict=False)):
        if a != b:
            return index
    return None if len(reference) == len(other) else min(len(reference), len(other))


@torch.no_grad()
def divergence_margins(
    model: torch.nn.Module, prompt: Sequence[int], ar_tokens: Sequence[int], other_tokens: Sequence[int]
) -> Divergence | None:
    """Margins at the first position where ``other_tokens`` leaves ``ar_tokens`` (None when equal).

    One forward pass (no cache) over ``prompt`` plus the shared prefix, in the model's own dtype, so
    the margins carry the same precision as the outputs they explain; the logits are compared in
    float32. Both outputs must continue the same ``prompt``.
    """
    index = first_divergence(ar_tokens, other_tokens)
    if index is None:
        return None
    ar_token = int(ar_tokens[index]) if index < len(ar_tokens) else None
    other_token = int(other_tokens[index]) if index < len(other_tokens) else None
    if ar_token is None or other_token is None:
        return Divergence(index, ar_token, other_token, math.nan, math.nan)
    ids = torch.tensor([[*prompt, *ar_tokens[:index]]], device=model_device(model))
    logits = model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[0, -1].float()
    ar_logit = logits[ar_token].item()
    logits[ar_token] = -math.inf
    runner_up = logits.max().item()
    other_logit = logits[other_token].item()
    return Divergence(index, ar_token, other_token, ar_logit - runner_up, ar_logit - other_logit)
