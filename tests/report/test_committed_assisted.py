"""The committed draft-model comparison (paper_figures/assisted/) recomputes from its committed rows.

Every number of its summary table (speedup and interval, compression, the draft's share of time,
match rate, n) must come out of ``rows/assisted.parquet`` again, with the same bootstrap settings.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from lade_bench import stats

FOLDER = Path(__file__).resolve().parents[2] / "paper_figures" / "assisted"
COMPARED = (
    "n_units",
    "n_pairs",
    "n_errors",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "compression_ratio",
    "tokens_per_s",
    "draft_time_share",
    "matches_ar",
    "new_tokens",
    "decode_steps",
)


def test_the_summary_table_recomputes_from_the_committed_rows():
    rows = pd.read_parquet(FOLDER / "rows" / "assisted.parquet")
    committed = pd.read_csv(FOLDER / "tables" / "cells_summary.csv")
    recomputed = stats.summarize(rows)
    assert list(recomputed["arm"]) == list(committed["arm"])
    assert set(recomputed["arm"]) == {"ar", "lookahead", "prompt_lookup", "jacobi", "assisted"}
    for new, old in zip(recomputed.to_dict("records"), committed.to_dict("records"), strict=True):
        for column in COMPARED:
            a, b = new[column], old[column]
            if b is None or (isinstance(b, float) and math.isnan(b)):
                assert a is None or (isinstance(a, float) and math.isnan(a)), (new["arm"], column)
            else:
                assert a == pytest.approx(b, rel=1e-9), (new["arm"], column)
    # Every greedy arm produced AR's tokens on every paired row.
    assert (recomputed.loc[recomputed["arm"] != "ar", "matches_ar"] == 1.0).all()
