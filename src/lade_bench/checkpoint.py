"""Carry an unfinished sweep from one sitting (or machine) to the next: its finished cells, nothing half-run.

A reference sweep can run longer than one sitting on a machine whose disk is not kept. Its output
folder cannot be committed as results (it is not finished), and a plain copy would carry a cell
killed mid-run, which would then resume on another machine, a day later, as one cell. A checkpoint
keeps what a resume can trust::

    python -m lade_bench.checkpoint save SWEEP_DIR CHECKPOINT_DIR
    python -m lade_bench.checkpoint restore CHECKPOINT_DIR SWEEP_DIR
    python -m lade_bench.run ...   # the sweep's own command: checkpointed cells are verified, not rerun

``save`` copies every *done* cell (``python -m lade_bench.status``'s state: finished and verified),
those cells' lines of ``index.jsonl`` and the sweep's device profiles, and replaces
``CHECKPOINT_DIR`` whole. W&B run files are not carried (run outputs stay out of a repository): the
sweep's command logs a restored cell to W&B again from its rows, without loading the model. Cells
in any other state are left out, so they run again from their first row. A done cell with failed
rows, or greedy rows that differ from AR, is kept (its rows are what happened) and named in the
output, so that it is not carried on as a whole result unnoticed. ``restore`` copies a checkpoint
into a sweep folder that does not exist yet.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lade_bench.results.progress import sweep_progress
from lade_bench.results.sweep_index import INDEX_JSONL
from lade_bench.results.sweep_layout import PROFILE_JSON, PROFILES_DIR


@dataclass(frozen=True)
class CheckpointResult:
    """What :func:`save_checkpoint` kept, what it left out (``<cell folder>: <state>``), and which kept
    cells have failed rows or greedy rows that differ from AR (``<cell folder>: <counts>``)."""

    path: Path
    kept: tuple[str, ...]
    left_out: tuple[str, ...]
    flawed: tuple[str, ...] = ()


def save_checkpoint(sweep_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> CheckpointResult:
    """Write the done cells of ``sweep_dir``, their index lines and its device profiles to ``out_dir``.

    ``out_dir`` is built beside itself and swapped in only when complete, so a kill while saving
    leaves the previous checkpoint as it was.

    Raises:
        FileNotFoundError: no sweep folder (with an index) at ``sweep_dir``.
        ValueError: ``out_dir`` lies inside the sweep folder, or the sweep's index cannot be read.
    """
    root, out = Path(sweep_dir), Path(out_dir)
    if not (root / INDEX_JSONL).is_file():
        raise FileNotFoundError(f"no sweep folder with an {INDEX_JSONL} at {root}")
    if out.resolve().is_relative_to(root.resolve()):
        raise ValueError(f"checkpoint folder {out} lies inside the sweep folder {root}; choose one outside it")
    progress = sweep_progress(root)
    done = {cell.cell_id: cell.name for cell in progress.cells if cell.state == "done" and cell.cell_id}
    left_out = tuple(f"{cell.name}: {cell.state}" for cell in progress.cells if cell.state != "done")
    flawed = tuple(f"{cell.name}: {cell.flaws}" for cell in progress.flawed_done_cells())
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name in done.values():
            shutil.copytree(root / name, staging / name, ignore=shutil.ignore_patterns(".*.tmp"))
        (staging / INDEX_JSONL).write_bytes(_index_lines(root, set(done)))
        for source in [*sorted((root / PROFILES_DIR).glob("*.json")), root / PROFILE_JSON]:
            if source.is_file():
                target = staging / source.relative_to(root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return CheckpointResult(path=out, kept=tuple(sorted(done.values())), left_out=left_out, flawed=flawed)


def restore_checkpoint(checkpoint_dir: str | os.PathLike[str], sweep_dir: str | os.PathLike[str]) -> Path:
    """Copy a checkpoint into the new sweep folder ``sweep_dir``, where the sweep's command resumes it.

    Raises:
        FileNotFoundError: ``checkpoint_dir`` holds no ``index.jsonl``.
        FileExistsError: ``sweep_dir`` exists already (a restore never mixes into a live sweep).
    """
    source, target = Path(checkpoint_dir), Path(sweep_dir)
    if not (source / INDEX_JSONL).is_file():
        raise FileNotFoundError(f"no checkpoint at {source} (it has no {INDEX_JSONL})")
    if target.exists():
        raise FileExistsError(f"{target} exists; restore into a new sweep folder, or rerun the sweep there as it is")
    shutil.copytree(source, target)
    return target


def _index_lines(root: Path, cell_ids: set[str]) -> bytes:
    """The index lines of ``cell_ids``, byte for byte (the runner rewrites the parquet copy on its next update)."""
    kept = []
    for line in (root / INDEX_JSONL).read_bytes().splitlines(keepends=True):
        if line.strip() and json.loads(line).get("cell_id") in cell_ids:
            kept.append(line if line.endswith(b"\n") else line + b"\n")
    return b"".join(kept)


def _swap_in(staging: Path, out: Path) -> None:
    """Replace ``out`` with ``staging``; the old folder is removed only after the new one is in place."""
    if not out.exists():
        staging.rename(out)
        return
    retired = out.with_name(f".{out.name}.old")
    shutil.rmtree(retired, ignore_errors=True)
    out.rename(retired)
    staging.rename(out)
    shutil.rmtree(retired)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lade_bench.checkpoint {save,restore} SOURCE TARGET``."""
    parser = argparse.ArgumentParser(
        prog="python -m lade_bench.checkpoint",
        description="Carry an unfinished sweep's done cells to a later sitting: save them to a folder you can "
        "commit or copy, restore them as a sweep folder, then rerun the sweep's command.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    save = commands.add_parser("save", help="write the done cells of SWEEP_DIR to CHECKPOINT_DIR (replaced whole)")
    save.add_argument("sweep_dir")
    save.add_argument("checkpoint_dir")
    restore = commands.add_parser("restore", help="copy CHECKPOINT_DIR into the new sweep folder SWEEP_DIR")
    restore.add_argument("checkpoint_dir")
    restore.add_argument("sweep_dir")
    args = parser.parse_args(argv)
    try:
        if args.command == "save":
            result = save_checkpoint(args.sweep_dir, args.checkpoint_dir)
            print(f"checkpoint {result.path}: {len(result.kept)} done cell(s) kept")
            for line in result.left_out:
                print(f"  left out, runs again from its start: {line}")
            for line in result.flawed:
                print(f"  kept, but not a whole result: {line}")
        else:
            target = restore_checkpoint(args.checkpoint_dir, args.sweep_dir)
            print(f"restored into {target}; rerun the sweep's command to run the cells not in it")
    except (FileNotFoundError, FileExistsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
