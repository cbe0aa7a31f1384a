"""The committed draft-model comparison (paper_figures/assisted/) recomputes from its committed rows.

Every number of its summary table (speedup and interval, compression, the draft's share of time,
match rate, n) must come out of ``rows/assisted.parquet`` again, with the same bootstrap settings.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from lade_bench import stats

from .committed import assert_recomputes

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
    assert_recomputes(recomputed, committed, COMPARED, key="arm")
    # Every greedy arm produced AR's tokens on every paired row.
    assert (recomputed.loc[recomputed["arm"] != "ar", "matches_ar"] == 1.0).all()


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def test_every_number_of_the_readme_table_recomputes_from_the_committed_rows():
    """The hand-written table of paper_figures/assisted/README.md quotes the rows, not a memory of them."""
    rows = pd.read_parquet(FOLDER / "rows" / "assisted.parquet")
    paired = stats.common_rows(rows)
    records = {rec["arm"]: rec for rec in stats.summarize(rows).to_dict("records")}
    labels = {"lookahead": "lookahead N5 W7 G7", "prompt_lookup": "prompt lookup", "jacobi": "Jacobi (no pool)"}
    labels["assisted"] = "assisted (SmolLM2 draft)"
    table = {}
    for line in (FOLDER / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in labels.values():
            table[cells[0]] = [c.replace("*", "") for c in cells[1:]]
    assert set(table) == set(labels.values())
    for arm, label in labels.items():
        rec = records[arm]
        mean = stats.per_sample_mean(stats.per_sample_totals(paired, arm), sampled=False)
        n, speedup, per_sample, compression, draft = table[label]
        assert n == f"{rec['n_units']} / {rec['n_pairs']}"
        assert speedup == f"{rec['speedup']:.2f}x [{rec['speedup_ci_low']:.2f}, {rec['speedup_ci_high']:.2f}]"
        assert per_sample == f"{mean:.2f}x"
        assert compression == f"{rec['compression_ratio']:.2f}"
        share = rec["draft_time_share"]
        assert draft == ("" if math.isnan(share) else _percent(share))
