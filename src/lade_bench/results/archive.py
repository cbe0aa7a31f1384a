"""A finished sweep in the form a repository commits: its per-sample rows and what its report reads.

Layout of an archive (``python -m lade_bench.results.archive SWEEP_DIR ARCHIVE_DIR``)::

    <archive>/
      rows.parquet          every row of every cell, in the order a report loads them
      cells.json            per cell: sweep, cell id, cell folder, config.yaml, manifest.json, summary.json
      device_profiles/      the sweep's device profiles (and a legacy device_profile.json)

A report of the archive (``python -m lade_bench.report <archive> ...``) reads the same rows, declared
headlines, manifests and device profiles as a report of the sweep folder, so it writes the same
tables byte for byte: committed tables can be regenerated from the committed archive alone.

Only a finished sweep is archived: a cell still running, interrupted, failed, damaged, planned but
never started, or missing from the sweep index is refused by name, so a partial table is never
committed as whole.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lade_bench.results.atomic import atomic_write, atomic_write_json
from lade_bench.results.progress import sweep_progress
from lade_bench.results.reader import find_cell_dirs, load_cell_table
from lade_bench.results.sweep_layout import PROFILE_JSON, PROFILES_DIR
from lade_bench.results.writer import CONFIG_YAML, MANIFEST_JSON, ROWS_PARQUET, SUMMARY_JSON

ARCHIVE_CELLS = "cells.json"
# The side files of a cell folder an archive keeps, by the key they get in cells.json.
CELL_TEXT_FILES = {"config_text": CONFIG_YAML, "manifest_text": MANIFEST_JSON, "summary_text": SUMMARY_JSON}


@dataclass(frozen=True)
class ArchiveResult:
    """What :func:`export_archive` wrote: the folder, its row and cell counts and the profiles copied."""

    path: Path
    n_rows: int
    n_cells: int
    profiles: tuple[str, ...]


def is_archive(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an archive folder (it holds ``cells.json`` beside ``rows.parquet``)."""
    root = Path(path)
    return (root / ARCHIVE_CELLS).is_file() and (root / ROWS_PARQUET).is_file()


def read_archive_cells(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The cell records of an archive's ``cells.json``, in row order.

    Raises:
        ValueError: ``cells.json`` is not a list of records with a sweep and a cell id (named).
    """
    file = Path(path) / ARCHIVE_CELLS
    records = json.loads(file.read_text(encoding="utf-8"))
    if not isinstance(records, list) or not all(
        isinstance(r, dict) and isinstance(r.get("sweep"), str) and isinstance(r.get("cell_id"), str) for r in records
    ):
        raise ValueError(f"{file}: not a list of cell records with 'sweep' and 'cell_id'")
    return records


def cell_manifests(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``{cell id: manifest}`` of every cell of a sweep folder or of an archive (cells without one: absent)."""
    root = Path(path)
    if is_archive(root):
        texts = [r.get("manifest_text") for r in read_archive_cells(root)]
    else:
        texts = [
            (cell / MANIFEST_JSON).read_text(encoding="utf-8")
            for cell in find_cell_dirs(root)
            if (cell / MANIFEST_JSON).is_file()
        ]
    manifests = [json.loads(text) for text in texts if text]
    return {str(m["cell_id"]): m for m in manifests if "cell_id" in m}


def unfinished_cells(sweep_dir: str | os.PathLike[str]) -> list[str]:
    """One ``<cell folder>: <why>`` per cell of the sweep that is not finished; ``[]`` when all are.

    The states are ``python -m lade_bench.status``'s (``results.progress``): a cell is finished when
    it is *done* and its files verify. Running, interrupted, failed and damaged cells, planned jobs of
    the latest launch that never started, and folders with rows the index does not know are listed,
    as is an index line that cannot be read.
    """
    root = Path(sweep_dir)
    progress = sweep_progress(root)
    problems = [
        f"{cell.name}: {cell.state}" + (f" ({cell.error})" if cell.error else "")
        for cell in progress.cells
        if cell.state != "done"
    ]
    indexed = {cell.name for cell in progress.cells}
    for folder in find_cell_dirs(root):
        name = folder.relative_to(root).as_posix()
        if name not in indexed:
            problems.append(f"{name}: not in the sweep index")
    return problems + list(progress.warnings)


def export_archive(sweep_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> ArchiveResult:
    """Write the archive of a finished sweep folder to ``out_dir`` (files replaced atomically).

    Args:
        sweep_dir: ``<output_root>/<sweep_name>``.
        out_dir: the archive folder (created; outside the sweep folder).

    Raises:
        FileNotFoundError: no sweep folder at ``sweep_dir``.
        ValueError: ``out_dir`` lies inside the sweep, the sweep has no cells, or a cell is not
            finished or is damaged (each named, with why: :func:`unfinished_cells`).
    """
    root, out = Path(sweep_dir), Path(out_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"no sweep folder at {root}")
    if out.resolve().is_relative_to(root.resolve()):
        raise ValueError(f"archive folder {out} lies inside the sweep folder {root}; choose one outside it")
    problems = unfinished_cells(root)
    if problems:
        listed = "; ".join(problems)
        raise ValueError(f"sweep {root} is not finished, so it is not archived: {listed}. Run the sweep again")
    cells = find_cell_dirs(root)
    if not cells:
        raise ValueError(f"sweep {root} has no cells")
    return write_archive(root, cells, out)


def write_archive(root: Path, cells: Sequence[Path], out: Path) -> ArchiveResult:
    """Write the archive of ``cells`` (folders under ``root``) and ``root``'s device profiles to ``out``.

    Checks nothing about the cells: :func:`export_archive` is the entry point for a sweep folder (it
    refuses an unfinished one first); a caller that ran the cells itself, as the tuner's held-out
    validation does, knows they are finished.
    """
    tables = [load_cell_table(cell) for cell in cells]
    records = [_cell_record(root, cell, table) for cell, table in zip(cells, tables, strict=True)]
    rows = pa.concat_tables(tables)
    atomic_write(out / ROWS_PARQUET, lambda handle: pq.write_table(rows, handle))
    copied = _copy_profiles(root, out)
    atomic_write_json(out / ARCHIVE_CELLS, records)
    return ArchiveResult(path=out, n_rows=rows.num_rows, n_cells=len(records), profiles=copied)


def _cell_record(root: Path, cell: Path, table: pa.Table) -> dict[str, Any]:
    names = set(table.column("sweep").unique().to_pylist()), set(table.column("cell_id").unique().to_pylist())
    if len(names[0]) != 1 or len(names[1]) != 1:
        raise ValueError(f"cell {cell} holds rows of several sweeps or cells: {sorted(map(str, names[0] | names[1]))}")
    record: dict[str, Any] = {
        "sweep": names[0].pop(),
        "cell_id": names[1].pop(),
        "cell_dir": cell.relative_to(root).as_posix(),
        "n_rows": table.num_rows,
    }
    for key, name in CELL_TEXT_FILES.items():
        path = cell / name
        record[key] = path.read_text(encoding="utf-8") if path.is_file() else None
    return record


def _copy_profiles(root: Path, out: Path) -> tuple[str, ...]:
    sources = sorted((root / PROFILES_DIR).glob("*.json")) + [p for p in (root / PROFILE_JSON,) if p.is_file()]
    copied = []
    for source in sources:
        relative = source.relative_to(root)
        data = source.read_bytes()
        atomic_write(out / relative, lambda handle, data=data: handle.write(data))  # type: ignore[misc]
        copied.append(relative.as_posix())
    # A profile an earlier export copied and the sweep no longer has would be read as the sweep's.
    for stale in sorted((out / PROFILES_DIR).glob("*.json")):
        if stale.relative_to(out).as_posix() not in copied:
            stale.unlink()
    return tuple(copied)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lade_bench.results.archive SWEEP_DIR ARCHIVE_DIR``: archive a finished sweep."""
    parser = argparse.ArgumentParser(
        prog="python -m lade_bench.results.archive",
        description="Write a finished sweep's rows, cell records and device profiles to an archive folder "
        "that python -m lade_bench.report reads like the sweep folder.",
    )
    parser.add_argument("sweep_dir", help="the sweep folder, <output_root>/<sweep_name>")
    parser.add_argument("archive_dir", help="the archive folder to write (e.g. paper_figures/rows/<sweep>)")
    args = parser.parse_args(argv)
    try:
        result = export_archive(args.sweep_dir, args.archive_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"archive {result.path}: {result.n_rows} rows of {result.n_cells} cells, "
        f"{len(result.profiles)} device profile(s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
