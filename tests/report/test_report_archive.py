"""An archived sweep (results.archive) reports exactly as its sweep folder does, and only a finished one is archived."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from lade_bench.report.build import TABLES_DIR, build_report
from lade_bench.report.sweep import load_sweep
from lade_bench.results import load_rows
from lade_bench.results.archive import ARCHIVE_CELLS, export_archive, is_archive, main, read_archive_cells
from lade_bench.results.sweep_index import INDEX_JSONL
from lade_bench.results.sweep_plan import job_key, write_launch


def test_a_report_of_the_archive_writes_the_sweeps_tables_byte_for_byte(sweep_dir, sweep_report, tmp_path):
    archive = tmp_path / "rows" / sweep_dir.name
    stale = archive / "device_profiles" / "stale.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    result = export_archive(sweep_dir, archive)
    assert is_archive(archive) and not stale.exists()
    assert result.n_rows == len(load_rows(sweep_dir)) and result.profiles
    # The sweep folder's report: the one the CLI wrote (conftest.py), at the same bootstrap settings.
    from_sweep = sweep_report.out
    from_archive = build_report(archive, tmp_path / "from_archive", html=False, n_boot=sweep_report.n_boot)
    written = sorted(p.name for p in (from_sweep / TABLES_DIR).iterdir())
    assert written == sorted(p.name for p in (tmp_path / "from_archive" / TABLES_DIR).iterdir())
    assert "cells_summary.csv" in written and any(name.endswith(".md") for name in written)
    for name in written:
        expected = (from_sweep / TABLES_DIR / name).read_bytes()
        assert (tmp_path / "from_archive" / TABLES_DIR / name).read_bytes() == expected, name
    figures_of_sweep = [line.split()[1] for line in sweep_report.printed.splitlines() if line.startswith("figure ")]
    assert [f.png.name for f in from_archive.figures] == [Path(png).name for png in figures_of_sweep]
    assert figures_of_sweep


def test_the_archive_keeps_each_cells_headline_manifest_and_profile(sweep_dir, tmp_path):
    archive = tmp_path / "archive"
    export_archive(sweep_dir, archive)
    original, archived = load_sweep(sweep_dir), load_sweep(archive)
    key = lambda c: (c.sweep, c.cell_id)  # noqa: E731
    assert sorted(map(key, archived.cells)) == sorted(map(key, original.cells))
    by_key = {key(c): c for c in original.cells}
    for cell in archived.cells:
        assert cell.headline == by_key[key(cell)].headline
        assert cell.manifest == by_key[key(cell)].manifest
        assert cell.config_text == by_key[key(cell)].config_text
    assert set(archived.cell_profiles) == set(original.cell_profiles) != set()
    assert archived.headline_choice.equals(original.headline_choice)
    assert [r["n_rows"] for r in read_archive_cells(archive)] == [
        len(load_rows(sweep_dir / r["cell_dir"])) for r in read_archive_cells(archive)
    ]


def _copy(sweep_dir, tmp_path):
    copy = tmp_path / "sweep"
    shutil.copytree(sweep_dir, copy)
    return copy


def _set_status(sweep, cell_dir, status):
    lines = (sweep / INDEX_JSONL).read_text().splitlines()
    entries = [json.loads(line) for line in lines if line.strip()]
    for entry in entries:
        if entry["cell_dir"] == cell_dir:
            entry["status"] = status
    (sweep / INDEX_JSONL).write_text("".join(json.dumps(e) + "\n" for e in entries))


def _first_cell_dir(sweep):
    return json.loads((sweep / INDEX_JSONL).read_text().splitlines()[0])["cell_dir"]


def test_an_interrupted_cell_is_refused_by_name_and_nothing_is_written(sweep_dir, tmp_path):
    sweep = _copy(sweep_dir, tmp_path)
    cell = _first_cell_dir(sweep)
    _set_status(sweep, cell, "running")  # and no live job holds its lock: a killed run
    with pytest.raises(ValueError, match=rf"{re.escape(cell)}: interrupted"):
        export_archive(sweep, tmp_path / "archive")
    assert not (tmp_path / "archive").exists()


def test_a_planned_cell_that_never_started_is_refused(sweep_dir, tmp_path):
    """A launch killed before its last jobs started leaves no folder and no index entry for them."""
    sweep = _copy(sweep_dir, tmp_path)
    write_launch(sweep, [{"num": 0, "key": job_key(["lookahead.window=9"]), "name": "N5W9G7", "overrides": []}])
    with pytest.raises(ValueError, match=r"N5W9G7: pending"):
        export_archive(sweep, tmp_path / "archive")


def test_a_cell_missing_from_the_index_is_refused(sweep_dir, tmp_path):
    sweep = _copy(sweep_dir, tmp_path)
    cell = _first_cell_dir(sweep)
    lines = (sweep / INDEX_JSONL).read_text().splitlines(keepends=True)
    (sweep / INDEX_JSONL).write_text("".join(line for line in lines if cell not in line))
    with pytest.raises(ValueError, match=rf"{re.escape(cell)}: not in the sweep index"):
        export_archive(sweep, tmp_path / "archive")


def test_a_done_cell_without_its_summary_is_refused(sweep_dir, tmp_path):
    sweep = _copy(sweep_dir, tmp_path)
    cell = _first_cell_dir(sweep)
    (sweep / cell / "summary.json").unlink()
    with pytest.raises(ValueError, match=rf"{re.escape(cell)}: damaged \(.*summary.json: missing"):
        export_archive(sweep, tmp_path / "archive")


def test_an_archive_inside_the_sweep_is_refused(sweep_dir, tmp_path):
    sweep = _copy(sweep_dir, tmp_path)
    with pytest.raises(ValueError, match="lies inside the sweep folder"):
        export_archive(sweep, sweep / "archive")


def test_the_cli_archives_and_reports_a_bad_folder_plainly(sweep_dir, tmp_path, capsys):
    assert main([str(sweep_dir), str(tmp_path / "archive")]) == 0
    out = capsys.readouterr().out
    cells = json.loads((tmp_path / "archive" / ARCHIVE_CELLS).read_text())
    assert f"{len(cells)} cells" in out and str(tmp_path / "archive") in out
    assert main([str(tmp_path / "missing"), str(tmp_path / "other")]) == 2
    assert "no sweep folder at" in capsys.readouterr().err
