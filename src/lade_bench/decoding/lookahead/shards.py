"""How lookahead parallelism splits one step over ranks: each rank's share and its sub-layout.

A step's window columns and its candidates are each cut into contiguous, nearly equal shares (the
first ``total % ranks`` ranks get one more; shares may be empty). A rank's input is the part of the
single-device step input (``layout.py``) that its own rows attend to: cur, the level-0 tokens of
every column up to its last one (level 0 is causal across columns, so later columns need the earlier
ones as context), the higher levels of its own columns, and its own candidates. Its mask and
positions are the single-device layout's restricted to those inputs, so each of its rows sees
exactly what the same row sees on one device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lade_bench.decoding.core.layout import StepLayout, build_step_layout


def share(total: int, ranks: int, rank: int) -> range:
    """The contiguous part of ``range(total)`` that ``rank`` of ``ranks`` handles (possibly empty)."""
    base, extra = divmod(total, ranks)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (rank < extra))


def largest_share(total: int, ranks: int) -> int:
    """Size of the largest share (every rank pads its exchanged data to it)."""
    return -(-total // ranks)


@dataclass(frozen=True)
class ShardLayout:
    """One rank's part of a step.

    Attributes:
        layout: the rank's own step layout (mask block, positions, logit rows) over its inputs;
            ``last_level_rows`` cover its own columns, ``candidate_rows`` its own candidates and
            ``candidate_offset`` is where its first candidate token sits in its input.
        input_indices: which tokens of the single-device step input this rank feeds, in order
            (cur, index 0, always first).
        columns: the window columns whose last-level predictions this rank makes.
        candidates: the candidates (indices into the step's candidate list) this rank verifies.
    """

    layout: StepLayout
    input_indices: list[int]
    columns: range
    candidates: range


def build_shard_layout(
    levels: int,
    columns: int,
    candidates: int,
    candidate_length: int,
    rank: int,
    ranks: int,
    dtype: torch.dtype,
    device: torch.device | str,
) -> ShardLayout:
    """The sub-layout of ``rank`` for a step with ``levels`` x ``columns`` window and ``candidates`` guesses."""
    full = build_step_layout(levels, columns, candidates, candidate_length, dtype, "cpu")
    own_columns = share(columns, ranks, rank)
    own_candidates = share(candidates, ranks, rank)
    # Level 0 of columns 0..last own column (column 0 is cur); just cur for a rank without columns.
    level0_end = own_columns.stop if len(own_columns) else 1
    inputs = list(range(level0_end))
    for level in range(1, levels):
        inputs.extend(level * columns + j for j in own_columns)
    window_size = levels * columns
    candidate_offset = len(inputs)
    for i in own_candidates:
        start = window_size + i * candidate_length
        inputs.extend(range(start, start + candidate_length))

    local = {source: target for target, source in enumerate(inputs)}
    last_level_inputs = [local[(levels - 1) * columns + j] for j in own_columns]
    candidate_inputs = list(range(candidate_offset, len(inputs)))
    # cur's row (0) is always kept: every rank computes it (rank 0's is the one used).
    logit_rows = sorted({0, *last_level_inputs, *candidate_inputs})
    row_of_input = {input_index: row for row, input_index in enumerate(logit_rows)}
    index = torch.tensor(inputs)
    layout = StepLayout(
        mask_block=full.mask_block[index][:, index].to(device),
        position_offsets=full.position_offsets[index].to(device),
        logit_rows=torch.tensor(logit_rows, device=device),
        last_level_rows=[row_of_input[i] for i in last_level_inputs],
        candidate_rows=[
            [row_of_input[candidate_offset + c * candidate_length + t] for t in range(candidate_length)]
            for c in range(len(own_candidates))
        ],
        candidate_offset=candidate_offset,
    )
    return ShardLayout(layout, inputs, own_columns, own_candidates)


class ShardLayoutCache:
    """Builds each distinct shard layout of one rank once per generation."""

    def __init__(
        self, candidate_length: int, rank: int, ranks: int, dtype: torch.dtype, device: torch.device | str
    ) -> None:
        """Shard layouts of ``rank`` of ``ranks`` for ``candidate_length``-token candidates."""
        self._args = (candidate_length, rank, ranks, dtype, device)
        self._layouts: dict[tuple[int, int, int], ShardLayout] = {}

    def get(self, levels: int, columns: int, candidates: int) -> ShardLayout:
        """The shard layout for this window shape and candidate count."""
        key = (levels, columns, candidates)
        layout = self._layouts.get(key)
        if layout is None:
            length, rank, ranks, dtype, device = self._args
            layout = build_shard_layout(levels, columns, candidates, length, rank, ranks, dtype, device)
            self._layouts[key] = layout
        return layout
