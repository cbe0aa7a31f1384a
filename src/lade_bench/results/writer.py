"""Append-only per-cell row log (``rows.jsonl``) and its finalised table (``rows.parquet``).

Commit protocol: a row is committed once its JSON line *and its newline* are fsynced. A kill can
therefore leave at most one unterminated (or garbled) line at the end of the file; readers ignore
it and the next append cuts it off, so the file is always valid JSONL after a writer touched it.
A bad line anywhere else cannot come from a kill, so it is an error naming the line.

One writer process per cell at a time: the runner guarantees it with a cell lock
(``lade_bench.runner.locks``) and passes the lock's check as the writer's ``guard``, which every
write calls first; nothing here locks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lade_bench.results.atomic import (
    WriteFailed,
    atomic_write,
    atomic_write_json,
    atomic_write_text,
    fsync_dir,
    write_failed,
)
from lade_bench.results.schema import ROW_SCHEMA, row_key, upgrade_row, validate_row

ROWS_JSONL = "rows.jsonl"
ROWS_PARQUET = "rows.parquet"
SUMMARY_JSON = "summary.json"
MANIFEST_JSON = "manifest.json"
# The cell's resolved Hydra config (the runner and the tuner's held-out cells write it; reports read it).
CONFIG_YAML = "config.yaml"

RowKey = tuple[str, int, str, int]


@dataclass
class JsonlScan:
    """Result of reading a ``rows.jsonl`` tolerantly.

    Attributes:
        rows: the committed rows, validated and normalised, in file order (duplicates kept).
        committed_bytes: file offset just after the last committed line.
        file_bytes: size of the file when read; larger than ``committed_bytes`` iff a torn tail exists.
    """

    rows: list[dict[str, Any]]
    committed_bytes: int
    file_bytes: int

    @property
    def has_torn_tail(self) -> bool:
        """True when the file ends in an uncommitted (partial or garbled) line."""
        return self.file_bytes > self.committed_bytes


def scan_rows_jsonl(path: str | os.PathLike[str]) -> JsonlScan:
    """Read a ``rows.jsonl`` without modifying it, ignoring a torn last line.

    The last line is ignored when it has no newline (the write was cut) or does not parse (garbage
    left by a crash). Blank lines are skipped.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a corrupt or invalid line before the last one, named as ``path:line``.
    """
    path = Path(path)
    data = path.read_bytes()
    lines = data.split(b"\n")
    # split() leaves a final element: b"" if the file ends with a newline, else the unterminated tail.
    terminated, tail = lines[:-1], lines[-1]
    rows: list[dict[str, Any]] = []
    offset = 0
    committed = 0
    for index, raw in enumerate(terminated):
        lineno = index + 1
        offset += len(raw) + 1
        if not raw.strip():
            committed = offset
            continue
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
        except ValueError as exc:
            is_last = index == len(terminated) - 1 and not tail.strip()
            if is_last:
                break
            raise ValueError(f"{path}:{lineno}: corrupt line in the middle of the file ({exc})") from exc
        try:
            rows.append(validate_row(upgrade_row(obj)))
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from exc
        committed = offset
    return JsonlScan(rows=rows, committed_bytes=committed, file_bytes=len(data))


def dedupe_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Keep the last row of each ``(sample_id, turn, arm, repeat)``, in the order the survivors were written.

    Raises:
        ValueError: rows of more than one ``cell_id`` (the key is only unique within a cell).
    """
    latest: dict[RowKey, dict[str, Any]] = {}
    cell_ids: set[str] = set()
    for row in rows:
        cell_ids.add(row["cell_id"])
        key = row_key(row)
        latest.pop(key, None)  # re-insert so the order is that of the last write
        latest[key] = dict(row)
    if len(cell_ids) > 1:
        raise ValueError(f"rows of several cells mixed in one cell: {sorted(cell_ids)}")
    return list(latest.values())


def rows_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Build an arrow table with exactly ``ROW_SCHEMA`` from validated rows."""
    return pa.Table.from_pylist(list(rows), schema=ROW_SCHEMA)


def append_line(path: Path, data: bytes) -> None:
    """Append ``data`` (one terminated line) to ``path`` and fsync it: the commit of one row."""
    with open(path, "ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def salvage_rows_jsonl(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every valid row of a damaged ``rows.jsonl`` and one ``path:line: problem`` per line dropped.

    Unlike :func:`scan_rows_jsonl` it never raises on a bad line: it is how a finished cell whose
    rows were cut or garbled is reopened (the rows it drops are generated again).
    """
    path = Path(path)
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for lineno, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
            rows.append(validate_row(upgrade_row(obj)))
        except ValueError as exc:
            problems.append(f"{path}:{lineno}: {exc}")
    return rows, problems


def write_rows_jsonl(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace ``path`` atomically with ``rows``, one JSON line each (as :meth:`CellWriter.append` writes them)."""
    lines = [json.dumps(dict(row), ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows]
    atomic_write(Path(path), lambda handle: handle.write("".join(lines).encode("utf-8")))


class CellWriter:
    """Writes one cell's rows and side files into ``cell_dir``.

    Usage::

        writer = CellWriter(cell_dir)
        done = writer.done_keys()
        for row in produce(skip=done):
            writer.append(row)          # durable on return
        writer.finalize()               # rows.parquet, de-duplicated
        writer.write_json("summary.json", summary)
    """

    def __init__(self, cell_dir: str | os.PathLike[str], guard: Callable[[], None] | None = None) -> None:
        """Open ``cell_dir`` (created if missing); ``guard`` is called before every write and may raise."""
        self.cell_dir = Path(cell_dir)
        self.cell_dir.mkdir(parents=True, exist_ok=True)
        self._guard = guard or (lambda: None)
        self._prepared = False
        self._cell_id: str | None = None

    def __repr__(self) -> str:
        return f"CellWriter({str(self.cell_dir)!r})"

    @property
    def rows_path(self) -> Path:
        """Path of the append-only ``rows.jsonl``."""
        return self.cell_dir / ROWS_JSONL

    @property
    def parquet_path(self) -> Path:
        """Path of the finalised ``rows.parquet``."""
        return self.cell_dir / ROWS_PARQUET

    def append(self, row: Mapping[str, Any]) -> None:
        """Validate ``row`` and append it as one JSON line, fsynced before returning.

        The first append of a writer cuts off a torn last line left by a previous kill, and deletes a
        ``rows.parquet`` from an earlier finalize, which the new row would make stale.

        Raises:
            ValueError: the row does not match the schema (the message names the column), its
                ``cell_id`` differs from the rows already in this cell, or the existing file is
                corrupt before its last line.
        """
        clean = validate_row(row)
        self._guard()
        if not self._prepared:
            self._prepare()
        if self._cell_id is None:
            self._cell_id = clean["cell_id"]
        elif clean["cell_id"] != self._cell_id:
            raise ValueError(
                f"column 'cell_id': {clean['cell_id']!r} differs from {self._cell_id!r} already in "
                f"{self.cell_dir}; one cell directory holds one cell"
            )
        # Python's json writes NaN as the token NaN and reads it back, so NaN floats round-trip.
        data = (json.dumps(clean, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        created = not self.rows_path.exists()
        try:
            append_line(self.rows_path, data)
        except WriteFailed:
            raise
        except OSError as exc:
            # A partial line may be on disk: the next writer cuts it off like a kill's torn tail.
            raise write_failed(exc, self.rows_path, len(data)) from exc
        if created:
            fsync_dir(self.cell_dir)

    def _prepare(self) -> None:
        if self.rows_path.exists():
            scan = scan_rows_jsonl(self.rows_path)
            if scan.has_torn_tail:
                with open(self.rows_path, "r+b") as handle:
                    handle.truncate(scan.committed_bytes)
                    handle.flush()
                    os.fsync(handle.fileno())
            cell_ids = {row["cell_id"] for row in scan.rows}
            if len(cell_ids) > 1:
                raise ValueError(f"{self.rows_path}: rows of several cells {sorted(cell_ids)}")
            self._cell_id = next(iter(cell_ids), None)
        if self.parquet_path.exists():
            self.parquet_path.unlink()
            fsync_dir(self.cell_dir)
        self._prepared = True

    def read_rows(self) -> list[dict[str, Any]]:
        """Committed rows, de-duplicated by key (last wins); ``[]`` if nothing was written."""
        if not self.rows_path.exists():
            return []
        return dedupe_rows(scan_rows_jsonl(self.rows_path).rows)

    def done_keys(self, include_errors: bool = True) -> set[RowKey]:
        """Keys ``(sample_id, turn, arm, repeat)`` of committed rows, for resuming.

        Args:
            include_errors: with False, keys whose latest row has ``error`` set are left out, so a
                rerun retries them (the retry's row then wins at finalize).
        """
        return {row_key(row) for row in self.read_rows() if include_errors or row["error"] is None}

    def finalize(self) -> Path:
        """Write ``rows.parquet`` atomically from the committed rows, de-duplicated (last wins).

        Safe to call again (e.g. after a resumed run appended more rows). Returns the parquet path.
        """
        self._guard()
        table = rows_to_table(self.read_rows())

        def write(handle: IO[bytes]) -> None:
            pq.write_table(table, handle)

        atomic_write(self.parquet_path, write)
        return self.parquet_path

    def write_json(self, name: str, obj: Any) -> Path:
        """Atomically write ``obj`` as JSON to ``cell_dir/name`` (e.g. ``summary.json``, ``manifest.json``).

        If serialisation fails half way, the previous file is left untouched. JSON is valid YAML, so
        this also serves ``config.yaml``-like files; for real YAML text use :meth:`write_text`.
        """
        path = self._side_path(name)
        self._guard()
        atomic_write_json(path, obj)
        return path

    def write_text(self, name: str, text: str) -> Path:
        """Atomically write ``text`` to ``cell_dir/name`` (e.g. ``OmegaConf.to_yaml(cfg)``)."""
        path = self._side_path(name)
        self._guard()
        atomic_write_text(path, text)
        return path

    def _side_path(self, name: str) -> Path:
        if not name or Path(name).name != name or name in (".", ".."):
            raise ValueError(f"name must be a plain file name inside the cell directory, got {name!r}")
        if name in (ROWS_JSONL, ROWS_PARQUET):
            raise ValueError(f"{name} is managed by append()/finalize(), not write_json/write_text")
        return self.cell_dir / name
