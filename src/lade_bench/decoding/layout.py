"""Token layout of one lookahead step: attention-mask block, position offsets and logit rows.

Input order of a step (after the KV cache of everything accepted so far):
``[cur] + level0 (C-1) + level1..level_{m-1} (C each) + G' candidates x (N-1)``.
Layouts depend only on (levels m, columns C, candidates G', candidate length), so each is built once
and reused for every step with that shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StepLayout:
    """Everything about a step's shape that does not depend on the token values.

    Attributes:
        mask_block: (q, q) additive mask among the step's own tokens (0 = attend, dtype min = not).
        position_offsets: (q,) position of each input token relative to cur's position p.
        logit_rows: (r,) indices of the input rows whose logits are needed.
        last_level_rows: C indices *into logit_rows* of the last level's rows, in column order.
        candidate_rows: G' lists of N-1 indices *into logit_rows*, one list per candidate.
        candidate_offset: index of the first candidate token in the step input.
    """

    mask_block: torch.Tensor
    position_offsets: torch.Tensor
    logit_rows: torch.Tensor
    last_level_rows: list[int]
    candidate_rows: list[list[int]]
    candidate_offset: int

    @property
    def num_tokens(self) -> int:
        """q, the number of input tokens of the step."""
        return int(self.position_offsets.shape[0])


def build_step_layout(
    levels: int,
    columns: int,
    candidates: int,
    candidate_length: int,
    dtype: torch.dtype,
    device: torch.device | str,
) -> StepLayout:
    """Build the layout of a step with ``levels`` x ``columns`` window and ``candidates`` guesses.

    Attention rules: level 0 is causal; level l row j sees level-0 columns 0..j and column j of
    levels 1..l (its vertical trajectory); each candidate is a causal chain that sees cur and itself;
    lookahead and verification branches never see each other.
    """
    window_size = levels * columns
    level = torch.arange(levels).repeat_interleave(columns)
    column = torch.arange(columns).repeat(levels)
    sees_level0_prefix = (level[None, :] == 0) & (column[None, :] <= column[:, None])
    sees_trajectory = (level[None, :] >= 1) & (column[None, :] == column[:, None]) & (level[None, :] <= level[:, None])
    window_allowed = sees_level0_prefix | sees_trajectory

    chain = torch.arange(candidate_length)
    chain_allowed = chain[None, :] <= chain[:, None]
    q = window_size + candidates * candidate_length
    allowed = torch.zeros(q, q, dtype=torch.bool)
    allowed[:window_size, :window_size] = window_allowed
    for i in range(candidates):
        start = window_size + i * candidate_length
        block = slice(start, start + candidate_length)
        allowed[block, block] = chain_allowed
        allowed[block, 0] = True  # every candidate continues cur

    mask_block = torch.zeros(q, q, dtype=dtype)
    mask_block.masked_fill_(~allowed, torch.finfo(dtype).min)

    position_offsets = torch.cat([level + column, (1 + chain).repeat(candidates)])

    last_level = torch.arange((levels - 1) * columns, window_size)
    candidate_inputs = torch.arange(window_size, q)
    # cur's row (0) is always needed; it is also a last-level row when there is a single level.
    logit_rows = torch.unique(torch.cat([torch.tensor([0]), last_level, candidate_inputs]))
    row_of_input = torch.full((q,), -1, dtype=torch.long)
    row_of_input[logit_rows] = torch.arange(logit_rows.numel())

    return StepLayout(
        mask_block=mask_block.to(device),
        position_offsets=position_offsets.to(device),
        logit_rows=logit_rows.to(device),
        last_level_rows=row_of_input[last_level].tolist(),
        candidate_rows=row_of_input[candidate_inputs].view(candidates, candidate_length).tolist(),
        candidate_offset=window_size,
    )


class LayoutCache:
    """Builds each distinct step layout once per generation and hands out the stored one after."""

    def __init__(self, candidate_length: int, dtype: torch.dtype, device: torch.device | str) -> None:
        """Layouts for candidates of ``candidate_length`` tokens, masks in ``dtype`` on ``device``."""
        self._candidate_length = candidate_length
        self._dtype = dtype
        self._device = device
        self._layouts: dict[tuple[int, int, int], StepLayout] = {}

    def get(self, levels: int, columns: int, candidates: int) -> StepLayout:
        """The layout for this window shape and candidate count."""
        key = (levels, columns, candidates)
        layout = self._layouts.get(key)
        if layout is None:
            layout = build_step_layout(levels, columns, candidates, self._candidate_length, self._dtype, self._device)
            self._layouts[key] = layout
        return layout
