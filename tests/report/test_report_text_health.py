"""The report split by text health (issue 63): every table on the units whose AR output ends in no loop, and
the figure of accepted tokens per step against repetition per method."""

from __future__ import annotations

import pytest

from lade_bench.report import text_health
from lade_bench.report.build import build_report
from lade_bench.report.figures import FigureSkipped
from lade_bench.report.sweep import sweep_from_rows
from lade_bench.report.tables import NO_LOOP_HEADER, main_speedup_table
from lade_bench.stats import IntervalSettings
from tests.stats.rows import frame, row

LOOP = [5, 6, 7, 8] * 5
CLEAN = list(range(100, 120))
# (sample, output, AR's wall time, lookahead's wall time, lookahead's accepted tokens per step)
UNITS = [
    ("s0", LOOP, 4.0, 1.0, 4.0),
    ("s1", LOOP, 4.0, 1.0, 5.0),
    ("s2", CLEAN, 2.0, 2.5, 1.2),
    ("s3", CLEAN, 3.0, 2.5, 1.5),
]
INTERVALS = IntervalSettings(n_boot=100, min_units=2)


def _sweep(tmp_path, arms=("ar", "lookahead")):
    built = [
        row("c", sample, arm, wall=ar_wall if arm == "ar" else la_wall, tokens=20, steps=20, output_ids=ids,
            max_new_tokens=20, mean_accepted=1.0 if arm == "ar" else accepted)
        for sample, ids, ar_wall, la_wall, accepted in UNITS
        for arm in arms
    ]  # fmt: skip
    return sweep_from_rows(frame(tmp_path, built), intervals=INTERVALS)


def test_the_no_loop_sweep_is_the_split_every_table_shows(tmp_path):
    sweep = _sweep(tmp_path)
    split = text_health.units_sweep(sweep, text_health.UNITS_NO_LOOP)
    assert sorted(set(split.rows["sample_id"])) == ["s2", "s3"]
    whole, kept = (s.summary.set_index("arm").loc["lookahead"] for s in (sweep, split))
    assert kept["speedup"] == pytest.approx(5.0 / 5.0) and whole["speedup"] == pytest.approx(13.0 / 7.0)
    assert (kept["speedup"], kept["speedup_ci_low"], kept["n_units"]) == (
        whole["speedup_no_loop"],
        whole["speedup_no_loop_ci_low"],
        whole["n_units_no_loop"],
    )
    # The main table shows the split beside the speedup on all units.
    shown = main_speedup_table(sweep).set_index("Method")
    assert shown.loc["Lookahead", NO_LOOP_HEADER].startswith("1.00 [") and shown.loc["Lookahead", "Loops"] == "2/4"
    assert text_health.units_sweep(sweep, text_health.UNITS_ALL) is sweep


def test_unknown_units_are_refused_in_one_line_before_the_sweep_is_read(tmp_path):
    with pytest.raises(ValueError, match="^text-health units 'loops' is not one of: all, no_loop$"):
        build_report(tmp_path / "no-such-sweep", units="loops")


def test_the_figure_has_a_panel_per_method_with_its_rank_correlation(tmp_path):
    fig = text_health.accepted_vs_repetition(_sweep(tmp_path))
    (ax,) = [a for a in fig.axes if a.get_visible()]
    # Repeated share 13/17 for the loops (accepted 4 and 5), 0 for the clean outputs (1.2 and 1.5): the ranks of
    # x tie within each pair, so Spearman's rho is the Pearson correlation of ranks (1.5, 1.5, 3.5, 3.5) and
    # (3, 4, 1, 2): 0.894.
    assert "Spearman 0.89, n=4 outputs" in ax.get_title()
    with pytest.raises(FigureSkipped):
        text_health.accepted_vs_repetition(_sweep(tmp_path / "ar", arms=("ar",)))
