"""Every table and the HTML report name each cell's mode; cells of two modes stay separate rows."""

from __future__ import annotations

import pytest

from lade_bench.report import tables
from lade_bench.report.html_report import render_html
from lade_bench.report.sweep import sweep_from_rows
from tests.stats.rows import frame, row

TIMES = {"ar": 4.0, "lookahead": 2.0}


def _cell(cell: str, compiled: bool, *, scale: float = 1.0, arm_modes: dict[str, bool] | None = None) -> list[dict]:
    built = []
    for sample in range(10):
        for arm, base in TIMES.items():
            on = compiled if arm_modes is None else arm_modes[arm]
            mode = {"compiled": True, "compile_mode": "default", "compile_time_s": 2.0} if on else {}
            built.append(row(cell, f"s{sample}", arm, wall=scale * base * (1 + 0.1 * sample), **mode))
    return built


@pytest.fixture
def both_modes(tmp_path):
    """One sweep, one model and dataset: an eager cell and a compiled one (compiled AR twice as fast)."""
    return sweep_from_rows(frame(tmp_path, _cell("eager", False) + _cell("comp", True, scale=0.5)))


def test_the_main_table_has_a_headline_per_mode_and_says_which(both_modes):
    table = tables.main_speedup_table(both_modes)
    assert list(table.columns[:5]) == ["Sweep", "Model", "Dataset", "Mode", "Selection"]
    assert list(zip(table["Mode"], table["Method"], strict=True)) == [
        ("eager", "AR"),
        ("eager", "Lookahead"),
        ("compiled (default)", "AR"),
        ("compiled (default)", "Lookahead"),
    ]
    # Each lookahead is measured against the AR of its own mode (2x in both), never across them.
    speedups = table[table["Method"] == "Lookahead"]["Speedup, wall time (95% CI)"]
    assert all(text.startswith("2.00") for text in speedups)
    assert set(table["Selection"]) == {"only candidate"}
    assert "mode" in tables.PAPER_TABLES["main_speedup"].caption


def test_the_all_cells_table_names_the_mode_and_the_compile_time(both_modes):
    table = tables.summary_display_table(both_modes.summary)
    by_cell = table.set_index(["Cell", "Method"])
    assert by_cell.loc[("eager", "Lookahead"), "Mode"] == "eager"
    assert by_cell.loc[("comp", "Lookahead"), "Mode"] == "compiled (default)"
    assert by_cell.loc[("comp", "Lookahead"), "Compile time (s)"] == "20.0"  # 10 rows x 2.0 s
    assert by_cell.loc[("eager", "Lookahead"), "Compile time (s)"] == ""
    assert set(tables.ablation_wg_table(both_modes)["Mode"]) == {"eager", "compiled (default)"}


def test_an_eager_sweep_says_eager_and_shows_no_compile_time_column(tmp_path):
    sweep = sweep_from_rows(frame(tmp_path, _cell("eager", False)))
    table = tables.summary_display_table(sweep.summary)
    assert set(table["Mode"]) == {"eager"} and "Compile time (s)" not in table
    assert set(tables.main_speedup_table(sweep)["Mode"]) == {"eager"}


def test_the_html_report_names_both_modes(both_modes):
    main = tables.main_speedup_table(both_modes)
    page = render_html(
        both_modes, [], {}, {"main_speedup": ("caption", main)}, tables.summary_display_table(both_modes.summary)
    )
    assert page.count("compiled (default)") >= 4 and "<td>eager</td>" in page
    assert "never paired in a comparison" in page  # the rule, in the statistics section
    assert "<th>Modes</th><td>eager, compiled (default)</td>" in page  # the overview


def test_a_report_of_a_cell_whose_arms_ran_in_two_modes_is_refused(tmp_path):
    rows = frame(tmp_path, _cell("odd", False, arm_modes={"ar": False, "lookahead": True}))
    with pytest.raises(ValueError, match="mixing compiled and eager arms in one comparison is refused"):
        sweep_from_rows(rows)
