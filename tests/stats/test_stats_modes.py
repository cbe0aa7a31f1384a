"""Eager and compiled rows: never paired in one comparison, kept apart in summaries, headlines and drift."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lade_bench import stats
from tests.stats.rows import frame, row

MIXED = "mixing compiled and eager arms in one comparison is refused"
TIMES = {"ar": 4.0, "lookahead": 2.0}


def _cell(cell: str, *, compiled: dict[str, bool], samples: int = 12, scale: float = 1.0, **values) -> list[dict]:
    """Rows of one cell; ``compiled`` gives each arm's mode (a real cell has one mode for all arms)."""
    built = []
    for sample in range(samples):
        for arm, base in TIMES.items():
            mode = {"compiled": True, "compile_mode": "default", "compile_time_s": 1.5} if compiled[arm] else {}
            wall = scale * base * (1.0 + 0.1 * sample)
            built.append(row(cell, f"s{sample:02d}", arm, wall=wall, rougeL=0.5, **mode, **values))
    return built


def test_mode_labels():
    assert stats.mode_label(False) == "eager" and stats.mode_label(None) == "eager"
    assert stats.mode_label(pd.NA, None) == "eager"
    assert stats.mode_label(True, "reduce-overhead") == "compiled (reduce-overhead)"
    assert stats.mode_label(True, None) == "compiled"


def test_a_compiled_arm_is_not_paired_with_an_eager_ar(tmp_path):
    rows = frame(tmp_path, _cell("c0", compiled={"ar": False, "lookahead": True}))
    paired = stats.common_rows(rows)
    with pytest.raises(ValueError, match=MIXED) as info:
        stats.speedup_estimate(paired, "lookahead", sampled=False)
    # The message names which arm is in which mode.
    assert "compiled ['lookahead'], eager ['ar']" in str(info.value)
    with pytest.raises(ValueError, match=MIXED):
        stats.quality_delta(paired, "lookahead", "rougeL")
    with pytest.raises(ValueError, match=MIXED):
        stats.summarize(rows)


def test_rows_without_the_column_are_eager_and_pair_with_eager_rows(tmp_path):
    rows = frame(tmp_path, _cell("c0", compiled={"ar": False, "lookahead": False}))
    old = rows.drop(columns=["compiled", "compile_mode", "compile_time_s"])  # e.g. pd.read_parquet of a v5 file
    assert stats.row_compiled(old).tolist() == [False] * len(old)
    estimate = stats.speedup_estimate(stats.common_rows(old), "lookahead", sampled=False)
    assert estimate.value == pytest.approx(2.0)
    # An old eager AR row still refuses a compiled arm row.
    mixed = pd.concat([old[old["arm"] == "ar"], rows[rows["arm"] == "lookahead"].assign(compiled=True)])
    with pytest.raises(ValueError, match=MIXED):
        stats.per_sample_totals(mixed, "lookahead")


def test_cells_of_two_modes_are_separate_records_with_their_mode_and_compile_time(tmp_path):
    eager = _cell("eager", compiled={"ar": False, "lookahead": False})
    compiled = _cell("comp", compiled={"ar": True, "lookahead": True}, scale=0.5)
    summary = stats.summarize(frame(tmp_path, compiled + eager))
    modes = [stats.mode_label(r["compiled"], r["compile_mode"]) for r in summary.to_dict("records")]
    assert list(zip(summary["cell_id"], summary["arm"], summary["compiled"], modes, strict=True)) == [
        ("eager", "ar", False, "eager"),  # eager first
        ("eager", "lookahead", False, "eager"),
        ("comp", "ar", True, "compiled (default)"),
        ("comp", "lookahead", True, "compiled (default)"),
    ]
    assert summary["speedup"].tolist() == pytest.approx([1.0, 2.0, 1.0, 2.0])
    compile_times = summary.set_index(["cell_id", "arm"])["compile_time_s"]
    assert compile_times[("comp", "lookahead")] == pytest.approx(12 * 1.5)
    assert math.isnan(compile_times[("eager", "lookahead")])


def test_a_sweep_with_both_modes_has_a_headline_of_each(tmp_path):
    rows = frame(
        tmp_path,
        _cell("eager", compiled={"ar": False, "lookahead": False})
        + _cell("comp", compiled={"ar": True, "lookahead": True}, scale=0.5),
    )
    choice = stats.choose_headline(rows, stats.summarize(rows))
    assert sorted(choice[["mode", "cell_id", "selection"]].values.tolist()) == [
        ["compiled (default)", "comp", stats.SELECTION_ONLY],
        ["eager", "eager", stats.SELECTION_ONLY],
    ]


def test_ar_drift_compares_ar_work_of_one_mode_only(tmp_path):
    rows = frame(
        tmp_path,
        _cell("e1", compiled={"ar": False, "lookahead": False})
        + _cell("e2", compiled={"ar": False, "lookahead": False}, scale=1.1)
        + _cell("comp", compiled={"ar": True, "lookahead": True}, scale=0.5),
    )
    drift = stats.ar_drift(rows)
    # The two eager cells form the one group; the compiled AR, twice as fast, is not drift.
    assert drift[["mode", "n_cells"]].values.tolist() == [["eager", 2]]
    assert drift["relative_spread"].iloc[0] == pytest.approx(0.1 / 1.05)


def test_ar_drift_never_groups_two_dtypes(tmp_path):
    """bfloat16 AR that stopped at the same budget as float32 AR did the same steps but not the same work."""
    rows = frame(
        tmp_path,
        _cell("fp32_a", compiled={"ar": False, "lookahead": False})
        + _cell("fp32_b", compiled={"ar": False, "lookahead": False}, scale=1.2)
        + _cell("bf16", compiled={"ar": False, "lookahead": False}, scale=0.6),
    )
    dtypes = {
        (sweep, cell): "bfloat16" if cell == "bf16" else "float32"
        for sweep, cell in rows[["sweep", "cell_id"]].drop_duplicates().itertuples(index=False)
    }
    drift = stats.ar_drift(rows, cell_dtypes=dtypes)
    assert drift[["dtype", "n_cells"]].values.tolist() == [["float32", 2]]
    assert drift["relative_spread"].iloc[0] == pytest.approx(0.2 / 1.1)
    # Without the dtypes the three cells would read as one group, the precision's gain counted as drift.
    assert stats.ar_drift(rows)["n_cells"].tolist() == [3]
