"""``CLOCK_COLUMNS`` names every summary column that a clock moves, and only those.

Launcher, resume and archive checks compare two runs of the same cells on everything but these
columns; a new time-derived column left out of the list makes those checks fail on noise, and a
non-clock column put in it would hide a real difference.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lade_bench import results, stats
from tests.stats.rows import frame, row

SAMPLES = 12  # enough for a bootstrap interval, so the interval columns move too


def _rows(walls: np.ndarray) -> list[dict]:
    """Two arms on the same samples: same tokens and steps, wall times (and everything timed) from ``walls``."""
    out = []
    for i in range(SAMPLES):
        sample = f"s{i}"
        for j, arm in enumerate(("ar", "lookahead")):
            wall = float(walls[i, j])
            tokens, steps = 20 + i, (20 + i) if arm == "ar" else 10 + i
            out.append(
                row(
                    "c",
                    sample,
                    arm,
                    wall=wall,
                    tokens=tokens,
                    steps=steps,
                    forward_time_s=0.9 * wall,
                    draft_time_s=0.1 * wall,
                    compiled=True,
                    compile_mode="default",
                    compile_time_s=2.0 * wall,
                    # Outputs without a loop, so the speedup on the loop-free units moves too.
                    output_ids=list(range(tokens)),
                )
            )
    return out


def _changed(a: pd.DataFrame, b: pd.DataFrame) -> set[str]:
    return {c for c in a.columns if not a[c].equals(b[c])}


def test_only_clock_columns_differ_between_two_timings_of_the_same_rows(tmp_path):
    rng = np.random.default_rng(0)
    first = stats.summarize(frame(tmp_path / "a", _rows(rng.uniform(0.5, 2.0, (SAMPLES, 2)))))
    second = stats.summarize(frame(tmp_path / "b", _rows(rng.uniform(0.5, 2.0, (SAMPLES, 2)))))
    changed = _changed(first, second)
    assert changed <= set(stats.CLOCK_COLUMNS), changed - set(stats.CLOCK_COLUMNS)
    # Every listed column is one these rows can move: the list holds nothing that is not read from a clock.
    assert changed == set(stats.CLOCK_COLUMNS)


def test_the_row_clock_columns_are_the_timed_columns_of_the_schema():
    assert set(results.CLOCK_COLUMNS) <= set(results.COLUMN_NAMES)
    timed = {c.name for c in results.COLUMNS if c.name.endswith("_time_s") or c.name == "tokens_per_s"}
    assert set(results.CLOCK_COLUMNS) == timed
