"""The committed step-cost check (``paper_figures/step_cost/``) recomputed from the committed rows, and the numbers
docs/statistics.md quotes from it.

The command that regenerates it is the one ``check.md`` prints; its check computed again here from its arguments
must give the committed ``check.csv`` and ``check.md`` (the figure is not redrawn), and it must read every
committed sweep's rows.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd
import pytest

from lade_bench.report.step_cost_check import CHECK_COLUMNS, read_check
from lade_bench.report.step_cost_cli import CHECK_CSV, CHECK_MD, PROG, check_of, parse_sweeps
from lade_bench.report.step_cost_page import check_page, check_summary, predicted_rows

from .committed import assert_recomputes

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "paper_figures" / "step_cost"
DOC = ROOT / "docs" / "statistics.md"


def _command() -> list[str]:
    """The arguments of the command ``check.md`` says regenerates it (after the program name)."""
    (line,) = [line.strip() for line in (FOLDER / CHECK_MD).read_text().splitlines() if line.strip().startswith(PROG)]
    return shlex.split(line.removeprefix(PROG))


def _absolute(spec: str) -> str:
    """``SWEEP[=PROFILE]`` with both paths under the repository root (the command runs from it)."""
    folder, _, profile = spec.partition("=")
    return str(ROOT / folder) + (f"={ROOT / profile}" if profile else "")


@pytest.fixture(scope="module")
def recomputed() -> pd.DataFrame:
    """The check the committed command computes, from the committed rows (its figure is not redrawn here)."""
    args = _command()
    assert args[:2] == ["--out", "paper_figures/step_cost"]
    sweeps = parse_sweeps([_absolute(a) for a in args[2:]])
    return check_of(sweeps)


@pytest.mark.slow
def test_the_committed_check_recomputes_from_the_committed_rows(recomputed, tmp_path):
    # Through the CSV, as the command writes it, so both sides are read back alike.
    (tmp_path / CHECK_CSV).write_text(recomputed.to_csv(index=False))
    new, old = read_check(tmp_path / CHECK_CSV), read_check(FOLDER / CHECK_CSV)
    assert list(old.columns) == list(CHECK_COLUMNS)
    assert_recomputes(new, old, list(CHECK_COLUMNS), key="cell_id")
    page = check_page(recomputed, PROG + " " + shlex.join(_command()))
    assert page == (FOLDER / CHECK_MD).read_text()


def test_the_check_reads_every_committed_sweep():
    """Every committed rows archive is one of the command's sweeps (a new one must be added to the check)."""
    folders = {Path(a.partition("=")[0]) for a in _command() if not a.startswith("-")}
    archives = {p.parent.relative_to(ROOT) for p in (ROOT / "paper_figures").rglob("rows.parquet")}
    assert archives <= folders, archives - folders


def test_every_arm_is_predicted_or_listed_with_its_reason():
    check = read_check(FOLDER / CHECK_CSV)
    done = predicted_rows(check)
    assert (done["predicted"] > 0).all() and (check.loc[~check.index.isin(done.index), "not_predicted"] != "").all()
    # The model can describe every arm but the assisted one (two models) wherever a profile of the cell's key exists,
    # except in a cell that times AR on two step paths (the batch-invariant sweep), which one profile cannot price.
    profiled = check[~check["not_predicted"].str.startswith("no committed device profile")]
    two_paths = profiled["not_predicted"].str.startswith("the cell times AR on two step paths")
    assert set(profiled.loc[(profiled["not_predicted"] != "") & ~two_paths, "arm"]) == {"assisted"}
    assert set(check.loc[two_paths.reindex(check.index, fill_value=False), "sweep"]) == {"batch_invariant"}
    assert check["sampling"].any()


def _doc_section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_docs_quote_the_committed_check():
    check = read_check(FOLDER / CHECK_CSV)
    section = " ".join(_doc_section("How well it predicts the committed cells").split())  # lines wrap anywhere
    overall = check_summary(check)
    assert f"{overall.predicted} of {overall.arms} arms" in section
    assert f"median |predicted / measured − 1| is {100 * overall.median_abs_error:.1f}%" in section
    assert f"worst {100 * overall.worst_error:+.1f}% ({overall.worst_cell})" in section
    assert f"verdicts agree in {overall.agree} of {overall.verdicts}" in section
    assert f"inside the measured 95% interval in {overall.inside} of {overall.intervals}" in section
    for name, part in check.groupby("sweep", sort=False):
        summary = check_summary(part)
        if summary.predicted:
            row = f"| {name} | {summary.predicted} of {summary.arms} | {100 * summary.median_abs_error:.1f}% |"
            assert row in section, row
    for reading, count in overall.readings:
        assert f"{reading}: {count}" in section, reading
