"""The table notebooks: paired with their jupytext sources, stripped, and executed on the small sweep."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest

from lade_bench.report.notebook_runner import execute_notebook, inject_parameters
from lade_bench.report.tables import PAPER_TABLES, write_paper_table

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.parametrize("spec", list(PAPER_TABLES.values()), ids=list(PAPER_TABLES))
def test_notebook_pair_is_in_sync_and_stripped(spec):
    source = NOTEBOOKS / spec.notebook
    paired = source.with_suffix(".ipynb")
    assert source.is_file() and paired.is_file(), f"run: jupytext --sync {source}"
    from_text = jupytext.read(source)
    committed = nbformat.read(paired, as_version=4)
    assert [c.source for c in committed.cells] == [c.source for c in from_text.cells], (
        f"{paired.name} is out of date: run jupytext --sync notebooks/*.py"
    )
    for cell in committed.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{paired.name} has outputs committed"
    parameters = [c for c in from_text.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1 and "sweep_dir =" in parameters[0].source and "out_dir =" in parameters[0].source


def test_unknown_parameter_is_refused():
    notebook = jupytext.read(NOTEBOOKS / "main_table.py")
    with pytest.raises(ValueError, match="sweep_dri"):
        inject_parameters(notebook, {"sweep_dri": "x"})


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PAPER_TABLES))
def test_notebook_regenerates_its_table(name, sweep, sweep_dir, tmp_path):
    spec = PAPER_TABLES[name]
    out = tmp_path / "tables"
    executed = execute_notebook(
        NOTEBOOKS / spec.notebook, {"sweep_dir": str(sweep_dir), "out_dir": str(out)}, cwd=tmp_path
    )
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    tex, md = out / f"{name}.tex", out / f"{name}.md"
    assert tex.is_file() and md.is_file()
    # byte-identical to what the report CLI writes: one computation, whichever way it is run
    table, reference = write_paper_table(name, sweep, tmp_path / "reference")
    assert [tex.read_bytes(), md.read_bytes()] == [p.read_bytes() for p in reference]
    # and the numbers are the ones recomputed from the rows (first method row of the table)
    for value in table.iloc[:, -2]:
        assert str(value) in md.read_text()
