"""Paired units of several cells pooled into one comparison, each unit still paired within its own cell.

A leaderboard column (Spec-Bench's per-category speedup) can draw on several cells: one cell per
category group, or two cells that ran the same method beside their own AR. Each cell's rows are
paired first (``units.common_rows``: the keys every arm of that cell completed, against that cell's
AR), then the units are renamed ``<cell_id>/<sample_id>`` so that no sample of one cell can pair with,
or be resampled together with, a sample of another. Every estimator of ``stats`` then applies as to
one cell: the ratio of sums over all pooled samples, the bootstrap resampling samples.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from lade_bench.stats.units import UNIT_COLUMN, common_rows


def pooled_units(cells: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The paired rows of every cell in ``cells``, units renamed ``<cell_id>/<sample_id>``.

    Args:
        cells: the rows of one cell each (any subset of its samples: a unit is paired only if every
            arm of the cell has it).

    Returns:
        One frame of paired rows (empty, with the rows' columns, when nothing pairs).
    """
    frames = []
    for cell_rows in cells:
        paired = common_rows(cell_rows)
        frames.append(
            paired.assign(**{UNIT_COLUMN: paired["cell_id"].astype(str) + "/" + paired[UNIT_COLUMN].astype(str)})
        )
    if not frames:
        raise ValueError("pooled_units needs at least one cell")
    return pd.concat(frames, ignore_index=True)
