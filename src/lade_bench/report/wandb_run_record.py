"""The W&B sink's record of a cell's run (``<cell_dir>/wandb_run.json``): did the run finish whole?

A W&B run is written by a separate process over several seconds (table, figures, summary, exit), so
a kill can leave it truncated. The sink therefore writes this record twice:

* ``state: "started"`` with the run id, *before* ``wandb.init``: a kill from then on leaves a record
  that names the run to throw away;
* ``state: "finished"`` after ``run.finish()`` returned and the cell's figures were saved, with the
  offline run folder, the exit code and the figure files.

A cell's W&B output is complete only when the record says finished, for a done cell, in the current
mode, and the files it names exist. Anything else means: log the cell again. An interrupted offline
run is deleted first, so that ``wandb sync`` never uploads a truncated duplicate; an interrupted
online run stays on the server, where W&B shows it as crashed.

Paths are stored relative to the cell folder, so a sweep folder moved or copied as a whole still
counts as logged.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import string
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lade_bench.results.atomic import atomic_write_json

logger = logging.getLogger(__name__)

RUN_RECORD_JSON = "wandb_run.json"
STARTED = "started"
FINISHED = "finished"
_ID_ALPHABET = string.ascii_lowercase + string.digits


def new_run_id(cell_id: str | None = None) -> str:
    """A fresh W&B run id: 8 lowercase letters and digits (like W&B's own), after ``<cell_id>-`` if given.

    With the cell id in it, a cell's offline runs are found by their folder name even when its
    record is unreadable (:func:`discard_previous_runs`).
    """
    suffix = "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))
    return f"{cell_id}-{suffix}" if cell_id else suffix


def read_run_record(cell_dir: Path) -> dict[str, Any] | None:
    """The cell's run record, or None when there is none (or it is unreadable, which counts as none)."""
    path = Path(cell_dir) / RUN_RECORD_JSON
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError:
        # Written atomically, so this is a hand edit or a foreign file: treat as never logged.
        logger.warning("ignoring unreadable W&B run record %s", path)
        return None
    return record if isinstance(record, dict) else None


def record_started(cell_dir: Path, *, run_id: str, mode: str, wandb_dir: Path) -> None:
    """Note, before ``wandb.init``, that run ``run_id`` of the cell is being written under ``wandb_dir``."""
    cell_dir = Path(cell_dir)
    record = {"state": STARTED, "run_id": run_id, "mode": mode, "wandb_dir": _relative(wandb_dir, cell_dir)}
    atomic_write_json(cell_dir / RUN_RECORD_JSON, {**record, "updated_utc": _now()})


def record_finished(
    cell_dir: Path,
    *,
    run_id: str,
    mode: str,
    wandb_dir: Path,
    sync_dir: Path | None,
    exit_code: int,
    cell_status: str,
    figures: Sequence[Path],
) -> None:
    """Note that the cell's run was finished (call after ``run.finish()`` returned).

    Args:
        cell_status: the status logged to the run, ``"done"`` or ``"failed"``.
        figures: the figure files saved into the cell folder for this run.
    """
    cell_dir = Path(cell_dir)
    record = {
        "state": FINISHED,
        "run_id": run_id,
        "mode": mode,
        "wandb_dir": _relative(wandb_dir, cell_dir),
        "sync_dir": None if sync_dir is None else _relative(sync_dir, cell_dir),
        "exit_code": exit_code,
        "cell_status": cell_status,
        "figures": [Path(f).relative_to(cell_dir).as_posix() for f in figures],
        "updated_utc": _now(),
    }
    atomic_write_json(cell_dir / RUN_RECORD_JSON, record)


def missing_outputs(cell_dir: Path, mode: str) -> list[str]:
    """What the cell's W&B output lacks for a done cell logged in ``mode`` (empty when complete)."""
    cell_dir = Path(cell_dir)
    record = read_run_record(cell_dir)
    if record is None:
        return [f"no {RUN_RECORD_JSON}"]
    if record.get("state") != FINISHED:
        return [f"run {record.get('run_id')} was interrupted"]
    missing = []
    if record.get("mode") != mode:
        missing.append(f"run logged in mode {record.get('mode')!r}, not {mode!r}")
    if record.get("cell_status") != "done" or record.get("exit_code") != 0:
        missing.append(f"run {record.get('run_id')} logged a failed cell")
    sync_dir = record.get("sync_dir")
    if mode == "offline" and not (sync_dir and (cell_dir / sync_dir).is_dir()):
        missing.append(f"offline run folder {sync_dir} is gone")
    missing += [f"figure {name} is gone" for name in record.get("figures", []) if not (cell_dir / name).is_file()]
    return missing


def discard_interrupted_run(cell_dir: Path) -> list[Path]:
    """Delete the local offline folder of a run the record says was started but never finished.

    Returns the folders removed. Online runs are left alone (their local folder is only a cache,
    and the server keeps the crashed run as a record of what happened).
    """
    record = read_run_record(cell_dir)
    if record is None or record.get("state") != STARTED or record.get("mode") != "offline":
        return []
    run_id, wandb_dir = record.get("run_id"), record.get("wandb_dir")
    if not run_id or not wandb_dir:
        return []
    removed = []
    for folder in sorted((resolve_recorded(cell_dir, wandb_dir) / "wandb").glob(f"offline-run-*-{run_id}")):
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
        logger.info("removed the interrupted W&B offline run %s (the cell is logged again)", folder)
    return removed


def discard_previous_runs(cell_dir: Path, cell_id: str | None, wandb_dir: Path) -> list[Path]:
    """Delete the local offline folders of every earlier run of the cell, before it is logged again.

    One W&B run per cell: a cell is logged again only when its earlier run is no longer its whole,
    current record (interrupted, a failed attempt, rows regenerated after damage, or a record that
    no longer parses), so that run goes. The record names it; where the record is unreadable, the
    runs are found by the cell id their run id starts with (under ``wandb_dir``, where the sink logs
    now). Online runs stay on the server. Returns the folders removed.
    """
    folders: set[Path] = set()
    record = read_run_record(cell_dir)
    if record is not None and record.get("mode") == "offline" and record.get("run_id") and record.get("wandb_dir"):
        base = resolve_recorded(cell_dir, record["wandb_dir"]) / "wandb"
        folders.update(base.glob(f"offline-run-*-{record['run_id']}"))
    if record is None and cell_id:
        folders.update((Path(wandb_dir) / "wandb").glob(f"offline-run-*-{cell_id}-*"))
    removed = []
    for folder in sorted(folders):
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
        logger.info("removed the earlier W&B offline run %s (the cell is logged again)", folder)
    return removed


def resolve_recorded(cell_dir: Path, recorded: str) -> Path:
    """A path from the record (``sync_dir``, ``wandb_dir``) as a usable path."""
    return (Path(cell_dir) / recorded).resolve()


def _relative(path: Path, cell_dir: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), Path(cell_dir).resolve())).as_posix()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
