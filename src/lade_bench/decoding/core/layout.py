"""Token layout of one lookahead step: attention-mask block, position offsets and logit rows.

Input order of a step (after the KV cache of everything accepted so far):
``[cur] + level0 (C-1) + level1..level_{m-1} (C each) + the verification branch``.
The branch (``lade_bench.decoding.core.branch``) is G' flat chains of N-1 tokens or a token trie: a draft
tree rooted at cur (``draft_tree.py``), whose mask and positions are the tree's, and the layout
depends only on (levels m, columns C, the tree's parents), never on token values. So each layout is built
once and reused for every step with that shape (for flat branches: that candidate count; for tries:
that trie structure).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from lade_bench.decoding.core.branch import VerificationBranch


@dataclass(frozen=True)
class StepLayout:
    """Everything about a step's shape that does not depend on the token values.

    Attributes:
        mask_block: (q, q) additive mask among the step's own tokens (0 = attend, dtype min = not).
        position_offsets: (q,) position of each input token relative to cur's position p.
        logit_rows: (r,) indices of the input rows whose logits are needed.
        last_level_rows: C indices *into logit_rows* of the last level's rows, in column order.
        candidate_rows: G' lists of N-1 indices *into logit_rows*, one list per candidate (rows are
            shared between candidates whose prefixes share trie nodes).
        candidate_offset: index of the first branch token in the step input (branch index b is
            input ``candidate_offset + b``).
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

    @cached_property
    def visible(self) -> torch.Tensor:
        """(q, q) bool: which step tokens each step token sees (``mask_block``'s zeros).

        What a flex_attention ``mask_mod`` reads (``flex_masks.py``); computed once per layout.
        """
        return self.mask_block == 0

    def within_window(self, position: int, window: int) -> torch.Tensor:
        """(q, position + q) bool: the keys a sliding-window layer lets each step token see.

        The query at position id i sees the key at position id j only if ``i - j < window``, measured
        on position ids, so a window or candidate token sees what the same token would see in
        autoregressive decoding. The one statement of the rule: the float masks (``masks.py``) and
        the flex_attention block masks (``flex_masks.py``) both apply it.
        """
        query_positions = self.position_offsets + position
        cache_positions = torch.arange(position, device=query_positions.device)
        key_positions = torch.cat([cache_positions, query_positions])
        return (query_positions[:, None] - key_positions[None, :]) < window


def build_step_layout(
    levels: int,
    columns: int,
    candidates: int,
    candidate_length: int,
    dtype: torch.dtype,
    device: torch.device | str,
) -> StepLayout:
    """Build the layout of a step with ``levels`` x ``columns`` window and ``candidates`` flat chains."""
    parents = [-1]
    paths = []
    for _ in range(candidates):
        # Each chain hangs from cur (node 0); node k + 1 is branch token k.
        path = tuple(range(len(parents) - 1, len(parents) - 1 + candidate_length))
        parents.extend([0, *range(len(parents), len(parents) + candidate_length - 1)])
        paths.append(path)
    return build_branch_layout(levels, columns, parents, paths, dtype, device)


def build_branch_layout(
    levels: int,
    columns: int,
    parents: Sequence[int],
    paths: Sequence[Sequence[int]],
    dtype: torch.dtype,
    device: torch.device | str,
) -> StepLayout:
    """Build the layout of a step with ``levels`` x ``columns`` window and a draft-tree branch.

    Attention rules: level 0 is causal; level l row j sees level-0 columns 0..j and column j of
    levels 1..l (its vertical trajectory); the branch is a draft tree rooted at cur
    (``draft_tree.DraftTree``): each branch token sees cur and its ancestors in the tree and itself,
    at position offset = its depth; lookahead and verification branches never see each other. With
    one level and one column the window is cur alone and the layout is the draft tree's own.

    Args:
        parents: the branch tree's parents, root (cur, ``-1``) first: node k + 1 is branch token k,
            fed at input ``levels * columns + k``.
        paths: for each candidate, the branch index of each of its tokens (all paths equally long),
            for ``candidate_rows``; empty for a tree that is not made of candidates.
    """
    # Built in numpy and moved to torch once: a trie step may need a new layout, and a few dozen
    # small numpy operations cost far less than the same torch calls.
    window_size = levels * columns
    level = np.repeat(np.arange(levels), columns)
    column = np.tile(np.arange(columns), levels)
    sees_level0_prefix = (level[None, :] == 0) & (column[None, :] <= column[:, None])
    sees_trajectory = (level[None, :] >= 1) & (column[None, :] == column[:, None]) & (level[None, :] <= level[:, None])

    branch_size = len(parents) - 1
    q = window_size + branch_size
    allowed = np.zeros((q, q), dtype=bool)
    allowed[:window_size, :window_size] = sees_level0_prefix | sees_trajectory
    # Tree node k sits at input ``node_input[k]``: cur (the root) is input 0, the branch follows the window.
    node_input = np.concatenate([[0], np.arange(window_size, q)])
    depth = np.zeros(branch_size + 1, dtype=np.int64)
    for node in range(1, branch_size + 1):
        row = node_input[node]
        # A node sees what its parent sees (cur and the parent's ancestors), the parent and itself.
        allowed[row] = allowed[node_input[parents[node]]]
        allowed[row, node_input[parents[node]]] = True
        allowed[row, row] = True
        depth[node] = depth[parents[node]] + 1
    # In float64, which holds the minimum of every float dtype exactly, then cast to ``dtype``.
    mask_block = np.where(allowed, 0.0, torch.finfo(dtype).min)
    position_offsets = np.concatenate([level + column, depth[1:]])

    last_level = np.arange((levels - 1) * columns, window_size)
    # cur's row (0) is always needed; it is also a last-level row when there is a single level.
    logit_rows = np.unique(np.concatenate([[0], last_level, np.arange(window_size, q)]))
    row_of_input = np.full(q, -1, dtype=np.int64)
    row_of_input[logit_rows] = np.arange(logit_rows.size)
    path_inputs = (np.asarray(paths, dtype=np.int64) if paths else np.zeros((0, 0), dtype=np.int64)) + window_size

    return StepLayout(
        mask_block=torch.from_numpy(mask_block).to(device=device, dtype=dtype),
        position_offsets=torch.from_numpy(position_offsets).to(device),
        logit_rows=torch.from_numpy(logit_rows).to(device),
        last_level_rows=row_of_input[last_level].tolist(),
        candidate_rows=row_of_input[path_inputs].tolist(),
        candidate_offset=window_size,
    )


class LayoutCache:
    """Builds each distinct step layout once and hands out the stored one after.

    Flat steps have a handful of shapes (one per candidate count), trie steps one per trie structure
    seen; the least recently used layouts beyond ``capacity`` are dropped so a long generation with
    many distinct tries keeps bounded memory.
    """

    def __init__(self, dtype: torch.dtype, device: torch.device | str, capacity: int = 256) -> None:
        """Layouts with masks in ``dtype`` on ``device``, at most ``capacity`` kept."""
        self._dtype = dtype
        self._device = device
        self._capacity = capacity
        self._layouts: OrderedDict[tuple, StepLayout] = OrderedDict()

    def get(self, levels: int, columns: int, branch: VerificationBranch) -> StepLayout:
        """The layout for this window shape and branch structure (its tree's parents and its paths)."""
        key = (levels, columns, branch.tree.parents, branch.paths)
        layout = self._layouts.get(key)
        if layout is None:
            layout = build_branch_layout(levels, columns, branch.tree.parents, branch.paths, self._dtype, self._device)
            self._layouts[key] = layout
            if len(self._layouts) > self._capacity:
                self._layouts.popitem(last=False)
        else:
            self._layouts.move_to_end(key)
        return layout
