"""A done cell with failed rows or greedy rows that differ from AR is named, not counted as a whole result."""

from __future__ import annotations

import io
import json

from rich.console import Console

from lade_bench import checkpoint, status
from lade_bench.results import COLUMN_NAMES, CellWriter, update_index
from lade_bench.results.progress import sweep_progress
from lade_bench.results.writer import ROWS_JSONL


def _done_cell(root, make_row, cell_id, flaws=()):
    """A finished cell of 3 samples x (AR, lookahead); ``flaws``: (sample, "error" | "mismatch") of lookahead rows."""
    cell_dir = root / f"cell-{cell_id}"
    writer = CellWriter(cell_dir)
    flaw_of = dict(flaws)
    for sample in range(3):
        for arm in ("ar", "lookahead"):
            row = make_row(cell_id=cell_id, sample_id=f"s{sample}", arm=arm, matches_ar=None if arm == "ar" else True)
            if arm == "lookahead" and flaw_of.get(sample) == "error":
                row |= {"error": "RuntimeError: cannot reshape tensor of 0 elements", "matches_ar": None}
            if arm == "lookahead" and flaw_of.get(sample) == "mismatch":
                row["matches_ar"] = False
            writer.append(dict.fromkeys(COLUMN_NAMES) | row)
    writer.write_json("manifest.json", {"rows_expected": 6})
    update_index(root, cell_id, cell_dir=cell_dir, status="running", run={"run_id": "r"})
    writer.finalize()
    writer.write_json("summary.json", {"status": "done"})
    update_index(root, cell_id, cell_dir=cell_dir, status="done")
    return cell_dir


def test_failed_and_differing_rows_are_counted_and_shown(tmp_path, make_row, capsys):
    _done_cell(tmp_path, make_row, "whole")
    flawed_dir = _done_cell(tmp_path, make_row, "flawed", flaws=[(0, "error"), (2, "mismatch")])
    progress = sweep_progress(tmp_path)
    assert progress.counts()["done"] == 2  # still done: its rows are what happened
    cells = {cell.cell_id: cell for cell in progress.cells}
    assert (cells["whole"].rows_failed, cells["whole"].rows_mismatched) == (0, 0)
    assert (cells["flawed"].rows_failed, cells["flawed"].rows_mismatched) == (1, 1)
    assert progress.flawed_done_cells() == [cells["flawed"]]

    console = Console(width=300, record=True, file=io.StringIO())
    status.render(console, progress)  # without --all: the flawed done cell is listed, the whole one is not
    text = console.export_text()
    assert "1 done cell(s) with 1 failed row(s) and 1 greedy row(s) that differ from AR" in text
    assert flawed_dir.name in text and "cell-whole" not in text
    assert "1 row(s) failed, 1 greedy row(s) differ from AR" in text and "delete the cell's folder" in text
    assert status.main([str(tmp_path), "--json"]) == 0
    by_id = {cell["cell_id"]: cell for cell in json.loads(capsys.readouterr().out)["cells"]}
    assert (by_id["flawed"]["rows_failed"], by_id["flawed"]["rows_mismatched"]) == (1, 1)

    # A finished cell that lost its rows.jsonl is damaged; its parquet's rows are still counted.
    (flawed_dir / ROWS_JSONL).unlink()
    cell = next(c for c in sweep_progress(tmp_path).cells if c.cell_id == "flawed")
    assert (cell.state, cell.rows_written, cell.rows_failed, cell.rows_mismatched) == ("damaged", 6, 1, 1)


def test_a_checkpoint_keeps_a_flawed_cell_and_names_it(tmp_path, make_row, capsys):
    sweep = tmp_path / "sweep"
    _done_cell(sweep, make_row, "whole")
    flawed_dir = _done_cell(sweep, make_row, "flawed", flaws=[(1, "error")])
    result = checkpoint.save_checkpoint(sweep, tmp_path / "saved")
    assert result.kept == ("cell-flawed", "cell-whole")
    assert result.flawed == (f"{flawed_dir.name}: 1 row(s) failed, 0 greedy row(s) differ from AR",)
    assert checkpoint.main(["save", str(sweep), str(tmp_path / "saved")]) == 0
    assert f"kept, but not a whole result: {flawed_dir.name}: 1 row(s) failed" in capsys.readouterr().out


def test_a_timing_reference_that_differs_from_ar_is_no_flaw(tmp_path, make_row):
    """``ar_standard`` (AR on the standard step path beside a batch-invariant cell's AR) may differ from AR:
    its matches_ar is recorded as it is, and the status counts it as no flaw, from rows.jsonl or the parquet."""
    cell_dir = tmp_path / "cell-bi"
    writer = CellWriter(cell_dir)
    for arm, matches in (("ar", None), ("ar_standard", False), ("lookahead", True)):
        writer.append(dict.fromkeys(COLUMN_NAMES) | make_row(cell_id="bi", sample_id="s0", arm=arm, matches_ar=matches))
    writer.write_json("manifest.json", {"rows_expected": 3})
    update_index(tmp_path, "bi", cell_dir=cell_dir, status="running", run={"run_id": "r"})
    writer.finalize()
    writer.write_json("summary.json", {"status": "done"})
    update_index(tmp_path, "bi", cell_dir=cell_dir, status="done")
    (cell,) = sweep_progress(tmp_path).cells
    assert (cell.state, cell.rows_written, cell.rows_mismatched) == ("done", 3, 0)
    assert not sweep_progress(tmp_path).flawed_done_cells()
    (cell_dir / ROWS_JSONL).unlink()
    (cell,) = sweep_progress(tmp_path).cells
    assert (cell.rows_written, cell.rows_mismatched) == (3, 0)
