"""Sweep-level index: one entry per cell, so a rerun can skip finished cells and a reader can find them.

``index.jsonl`` in the sweep root is the source of truth; ``index.parquet`` is a convenience copy
rewritten after it. The parquet records the SHA-256 of the jsonl it was built from, so a crash
between the two (parquet one update behind) is noticed and repaired by the next update, even one
that changes nothing; the same next update deletes temp files a crash left mid-write.
Every update is a read-modify-write of the whole (small) file under the lock file
``_locks/index.lock``, created atomically (``O_EXCL``, see ``lockfile``): unlike ``flock`` it also
holds between the nodes of a cluster writing one sweep over NFS, so parallel cells (Slurm array jobs,
Ray workers, two terminals) do not lose each other's updates. A holder killed mid-update is taken
over at once on its own host, after :data:`INDEX_LOCK_STALE_S` from another. The file is replaced
with ``os.replace`` so a reader never sees half of it.

An entry is flat so it loads straight into a DataFrame::

    cell_id, cell_dir (relative to the sweep root, POSIX), status, error, updated_utc,
    <semantic config, nested keys joined with ".">, summary.<summary numbers, flattened>,
    run.<the latest run of the cell: run id, host, pid, job id, start time, log>
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lade_bench.results.atomic import atomic_write, remove_temp_files
from lade_bench.results.lockfile import exclusive
from lade_bench.results.sweep_layout import index_lock_path
from lade_bench.results.writer import SUMMARY_JSON

log = logging.getLogger(__name__)

INDEX_JSONL = "index.jsonl"
INDEX_PARQUET = "index.parquet"
# An index update holds its lock for milliseconds; a holder on another host silent this long is dead.
INDEX_LOCK_STALE_S = 120.0

STATUSES: tuple[str, ...] = ("running", "done", "failed")
INDEX_REPAIR_HINT = "rerun the sweep's command (python -m lade_bench.run ...) to rebuild the index from the cells"
BASE_FIELDS: tuple[str, ...] = ("cell_id", "cell_dir", "status", "error", "updated_utc")
SUMMARY_PREFIX = "summary."
RUN_PREFIX = "run."
_PREFIXES = (SUMMARY_PREFIX, RUN_PREFIX)
# Key in index.parquet's schema metadata: the SHA-256 of the index.jsonl it mirrors.
_SOURCE_DIGEST_KEY = b"lade_bench.index_jsonl_sha256"


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested mappings into ``{"a.b": value}``; lists and other leaves are kept as they are."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def read_index(sweep_root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Entries of ``index.jsonl`` in file order; ``[]`` when the sweep has no index yet.

    Raises:
        ValueError: a line that is not a JSON object with a cell id, named as ``path:line`` with what
            to run (the file is only ever replaced whole, so unlike ``rows.jsonl`` a bad line is
            never an expected crash artifact; the next run of the sweep rebuilds it).
    """
    entries, problems = salvage_index(sweep_root)
    if problems:
        raise ValueError(f"{problems[0]}; {INDEX_REPAIR_HINT}")
    return entries


def salvage_index(sweep_root: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The readable entries of ``index.jsonl`` and one ``path:line: problem`` per unreadable line.

    What the runner rebuilds the index from (each cell whose entry was lost gets it back when the
    sweep's next run reaches the cell) and what ``status`` shows while it is damaged.
    """
    path = Path(sweep_root) / INDEX_JSONL
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], []
    entries, problems = [], []
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            problems.append(f"{path}:{lineno}: corrupt index line ({exc})")
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("cell_id"), str) or "cell_dir" not in entry:
            problems.append(f"{path}:{lineno}: not an index entry (a JSON object with cell_id and cell_dir)")
            continue
        entries.append(entry)
    return entries, problems


def update_index(
    sweep_root: str | os.PathLike[str],
    cell_id: str,
    *,
    cell_dir: str | os.PathLike[str],
    status: str,
    config: Mapping[str, Any] | None = None,
    summary: Mapping[str, Any] | None = None,
    error: str | None = None,
    run: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Insert or update the entry of ``cell_id`` and rewrite the index atomically.

    Fields not given keep their previous value, except that ``status="running"`` drops the old
    summary (a new run makes it stale) and any status but ``"failed"`` clears ``error``. Calling it
    again with the same arguments leaves ``index.jsonl`` as it is (not even ``updated_utc``
    changes); it only rewrites an ``index.parquet`` that a crash left behind the jsonl.

    Args:
        sweep_root: the sweep's output root, holding ``index.jsonl``.
        cell_id: the cell's id (see :func:`lade_bench.results.cell_id`).
        cell_dir: the cell's directory, absolute or relative to ``sweep_root``; must lie inside it.
        status: ``"running"``, ``"done"`` or ``"failed"``.
        config: the cell's semantic config; flattened into the entry (replaces the previous one).
        summary: summary numbers; flattened under ``summary.`` (replaces the previous ones).
        error: a short failure message; only with ``status="failed"``.
        run: who runs the cell now (run id, host, pid, job id, start time, log); flattened under
            ``run.`` (replaces the previous run's); None keeps the previous run's.

    Returns:
        The entry as stored.

    Raises:
        ValueError: unknown status, ``error`` without ``"failed"``, a ``cell_dir`` outside the
            sweep root, or a config key that collides with a base field.
    """
    if status not in STATUSES:
        raise ValueError(f"status={status!r} is not one of {STATUSES}")
    if error is not None and status != "failed":
        raise ValueError("error may only be given with status='failed'")
    root = Path(sweep_root)
    root.mkdir(parents=True, exist_ok=True)
    rel_dir = _relative_cell_dir(root, Path(cell_dir))

    with exclusive(index_lock_path(root), stale_after_s=INDEX_LOCK_STALE_S):
        # Index writes happen only under this lock, so any index temp file seen now is a crash leftover.
        remove_temp_files(root, [INDEX_JSONL, INDEX_PARQUET])
        entries, problems = salvage_index(root)
        if problems:
            # Kept beside for a person to inspect; the cells whose lines were lost are indexed again
            # as the sweep's run reaches them.
            os.replace(root / INDEX_JSONL, root / f"{INDEX_JSONL}.damaged")
            log.warning("%s; rebuilt from the readable lines (damaged copy: %s.damaged)", problems[0], INDEX_JSONL)
        position = next((i for i, e in enumerate(entries) if e.get("cell_id") == cell_id), None)
        old = entries[position] if position is not None else {}

        old_config = {k: v for k, v in old.items() if k not in BASE_FIELDS and not k.startswith(_PREFIXES)}
        old_summary = {k: v for k, v in old.items() if k.startswith(SUMMARY_PREFIX)}
        old_run = {k: v for k, v in old.items() if k.startswith(RUN_PREFIX)}
        new_config = old_config if config is None else flatten(config)
        clash = sorted((set(new_config) & set(BASE_FIELDS)) | {k for k in new_config if k.startswith(_PREFIXES)})
        if clash:
            raise ValueError(f"config key(s) {clash} collide with index fields; rename them")
        if summary is not None:
            new_summary = flatten(summary, SUMMARY_PREFIX)
        elif status == "running":
            new_summary = {}
        else:
            new_summary = old_summary
        new_run = old_run if run is None else flatten(run, RUN_PREFIX)

        entry: dict[str, Any] = {
            "cell_id": cell_id,
            "cell_dir": rel_dir,
            "status": status,
            "error": error if status == "failed" else None,
            "updated_utc": old.get("updated_utc"),
            **new_config,
            **new_summary,
            **new_run,
        }
        if not problems and _comparable(entry) == _comparable(old):
            _sync_parquet(root, entries)
            return old
        entry["updated_utc"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        if position is None:
            entries.append(entry)
        else:
            entries[position] = entry
        _write_index(root, entries)
        return entry


def is_cell_done(sweep_root: str | os.PathLike[str], cell_id: str) -> bool:
    """True when the index marks ``cell_id`` done *and* its ``summary.json`` exists.

    Both are required: the index alone could be ahead of a cell directory that was deleted or copied
    without it, and a summary alone could be from a run whose index update was lost.
    """
    root = Path(sweep_root)
    for entry in salvage_index(root)[0]:  # a damaged line is no "done": the cell is looked at again
        if entry.get("cell_id") == cell_id:
            return entry.get("status") == "done" and (root / entry["cell_dir"] / SUMMARY_JSON).is_file()
    return False


def _comparable(entry: Mapping[str, Any]) -> str:
    # Compared as JSON text, as stored: NaN == NaN there, and 1 vs 1.0 read back from disk agree.
    return json.dumps({k: v for k, v in entry.items() if k != "updated_utc"}, sort_keys=True, default=str)


def _relative_cell_dir(root: Path, cell_dir: Path) -> str:
    absolute = cell_dir if cell_dir.is_absolute() else root / cell_dir
    try:
        rel = absolute.resolve().relative_to(root.resolve())
    except ValueError:
        raise ValueError(f"cell_dir {cell_dir} is not inside the sweep root {root}") from None
    if rel == Path("."):
        raise ValueError("cell_dir must be a subdirectory of the sweep root, not the root itself")
    return rel.as_posix()


def _write_index(root: Path, entries: list[dict[str, Any]]) -> None:
    text = b"".join((json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8") for e in entries)
    atomic_write(root / INDEX_JSONL, lambda handle: handle.write(text))
    _write_parquet(root, entries, hashlib.sha256(text).hexdigest())


def _write_parquet(root: Path, entries: list[dict[str, Any]], source_digest: str) -> None:
    table = _entries_to_table(entries)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _SOURCE_DIGEST_KEY: source_digest.encode()})
    atomic_write(root / INDEX_PARQUET, lambda handle: pq.write_table(table, handle))


def _sync_parquet(root: Path, entries: list[dict[str, Any]]) -> None:
    """Rewrite ``index.parquet`` when it is missing or was built from another ``index.jsonl``."""
    jsonl = root / INDEX_JSONL
    if not jsonl.is_file():
        return
    digest = hashlib.sha256(jsonl.read_bytes()).hexdigest()
    try:
        metadata = pq.read_schema(root / INDEX_PARQUET).metadata or {}
    except (OSError, pa.ArrowException):  # missing, or not a parquet file at all
        metadata = {}
    if metadata.get(_SOURCE_DIGEST_KEY) != digest.encode():
        _write_parquet(root, entries, digest)


def _entries_to_table(entries: list[dict[str, Any]]) -> pa.Table:
    # pa.Table.from_pylist takes its columns from the first entry only; cells may differ in keys.
    names: dict[str, None] = {}
    for entry in entries:
        names.update(dict.fromkeys(entry))
    columns = {}
    for name in names:
        values = [entry.get(name) for entry in entries]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            # Mixed types across cells (e.g. "auto" vs 8): keep the column, as JSON text.
            columns[name] = pa.array([None if v is None else json.dumps(v, default=str) for v in values])
    return pa.table(columns)
