"""Cheap checks that a finished cell's files are whole, and what to do about each damaged one.

A finished cell (its ``summary.json`` written, or the index marking it done) must have:

* ``rows.jsonl`` that parses to its last byte (a torn tail is a cut row, not a kill artifact, once
  the cell is finished), holding every row the manifest expects;
* ``rows.parquet`` readable, with exactly the row keys of ``rows.jsonl``;
* ``summary.json`` and ``manifest.json`` that parse as JSON objects where they exist, plus any side
  file the caller names (e.g. the W&B sink's record). Whether a missing one is damage is the
  caller's to say: the runner and ``status`` require both (the runner always writes them), a
  reader none (numbers come from the rows only, and a cell written without the runner may lack them).

Each problem is a :class:`Damage` with its remedy: ``"rebuild"`` (the file is derived from the rows
and the manifest, so it is rewritten without the model), ``"regenerate"`` (rows are missing or
unreadable, or the manifest that says which rows belong to the cell is: the cell is reopened and
its missing rows generated again) or ``"restart"`` (rows the manifest does not expect: more rows than
it counts, or rows of samples it did not keep, e.g. a cell resumed on another sample set before
resumes were checked; no repair can tell which rows belong, so the cell must be run afresh).
Readers refuse a damaged cell with :class:`DamagedCellError`;
the runner repairs it on the next run of the sweep.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from lade_bench.results.schema import row_key
from lade_bench.results.writer import MANIFEST_JSON, ROWS_JSONL, ROWS_PARQUET, SUMMARY_JSON, scan_rows_jsonl

Remedy = Literal["rebuild", "regenerate", "restart"]
# What a reader is told to run; the runner repairs a damaged cell on its next pass over the sweep.
REPAIR_HINT = "rerun the sweep's command (python -m lade_bench.run ...) to repair it"
# What to do with a cell whose rows do not all belong to it.
RESTART_HINT = "move the cell folder aside and rerun the sweep's command, which runs the cell afresh"


@dataclass(frozen=True)
class Damage:
    """One damaged file of a finished cell.

    Attributes:
        path: the file.
        problem: what is wrong, e.g. ``"line 7 is not JSON"``.
        remedy: ``"rebuild"`` from the rows, or ``"regenerate"`` the missing rows.
    """

    path: Path
    problem: str
    remedy: Remedy

    def describe(self) -> str:
        """One line: the file, what is wrong, and how it is repaired."""
        if self.remedy == "restart":
            return f"{self.path}: {self.problem} (not repairable: {RESTART_HINT})"
        how = "rebuilt from the rows" if self.remedy == "rebuild" else "its rows are generated again"
        return f"{self.path}: {self.problem} (on the next run {how})"


class DamagedCellError(ValueError):
    """A finished cell whose files are damaged; the message names the file and what to run."""


def read_json_object(path: Path) -> dict[str, Any]:
    """Parse ``path`` as a JSON object.

    Raises:
        FileNotFoundError: it does not exist.
        ValueError: it is not a JSON object (the message names the file).
    """
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def check_cell(
    cell_dir: str | os.PathLike[str], *, required: Iterable[str] = (), side_files: Iterable[str] = ()
) -> list[Damage]:
    """Every damaged file of the finished cell in ``cell_dir`` (empty when it is whole).

    Args:
        cell_dir: the cell folder.
        required: names among ``summary.json`` and ``manifest.json`` whose absence is damage too.
        side_files: further JSON files to parse-check when present (e.g. ``wandb_run.json``); damage
            there is ``"rebuild"``.
    """
    folder = Path(cell_dir)
    required = set(required)
    damage: list[Damage] = []
    remedies: dict[str, Remedy] = {MANIFEST_JSON: "regenerate", SUMMARY_JSON: "rebuild"}
    for name in side_files:
        remedies.setdefault(name, "rebuild")
    parsed = {}
    for name, remedy in remedies.items():
        if name in required or (folder / name).exists():
            parsed[name] = _json_damage(folder / name, remedy, damage)
    manifest = parsed.get(MANIFEST_JSON)
    keys = _rows_damage(folder, manifest, damage)
    parquet = folder / ROWS_PARQUET
    if keys is not None:
        try:
            table = pq.read_table(parquet, columns=["sample_id", "turn", "arm", "repeat"])
        except FileNotFoundError:
            damage.append(Damage(parquet, "missing", "rebuild"))
        except (OSError, pa.ArrowException) as exc:
            damage.append(Damage(parquet, f"not a readable parquet file ({exc})", "rebuild"))
        else:
            stored = {row_key(row) for row in table.to_pylist()}
            if stored != keys or table.num_rows != len(keys):
                damage.append(
                    Damage(parquet, f"holds {table.num_rows} rows, not the {len(keys)} of {ROWS_JSONL}", "rebuild")
                )
    return damage


def ensure_whole(cell_dir: str | os.PathLike[str]) -> None:
    """Raise :class:`DamagedCellError` naming the first damaged file of the finished cell, if any."""
    damage = check_cell(cell_dir)
    if damage:
        more = f" (and {len(damage) - 1} more damaged file(s))" if len(damage) > 1 else ""
        raise DamagedCellError(f"damaged cell: {damage[0].path}: {damage[0].problem}{more}; {REPAIR_HINT}")


def _json_damage(path: Path, remedy: Remedy, damage: list[Damage]) -> dict[str, Any] | None:
    try:
        return read_json_object(path)
    except FileNotFoundError:
        damage.append(Damage(path, "missing", remedy))
    except (OSError, ValueError) as exc:
        damage.append(Damage(path, _without_path(str(exc), path), remedy))
    return None


def _without_path(message: str, path: Path) -> str:
    # Messages name the file as "path: ..." or "path:line: ..."; Damage names it once, beside.
    if message.startswith(f"{path}:"):
        rest = message.removeprefix(f"{path}:")
        return rest.strip() if rest.startswith(" ") else f"line {rest}"
    return message


def _rows_damage(folder: Path, manifest: dict[str, Any] | None, damage: list[Damage]) -> set | None:
    """The row keys of ``rows.jsonl`` when it is whole; None (and a Damage) when it is not."""
    path = folder / ROWS_JSONL
    try:
        scan = scan_rows_jsonl(path)
    except FileNotFoundError:
        damage.append(Damage(path, "missing", "regenerate"))
        return None
    except (OSError, ValueError) as exc:
        damage.append(Damage(path, _without_path(str(exc), path), "regenerate"))
        return None
    if scan.has_torn_tail:
        cut = scan.file_bytes - scan.committed_bytes
        damage.append(Damage(path, f"ends in a cut or corrupt line ({cut} bytes)", "regenerate"))
        return None
    keys = {row_key(row) for row in scan.rows}
    unexpected = _unexpected_rows(keys, manifest or {})
    if unexpected is not None:
        damage.append(Damage(path, unexpected, "restart"))
        return None
    expected = (manifest or {}).get("rows_expected")
    if isinstance(expected, int) and len(keys) < expected:
        damage.append(Damage(path, f"holds {len(keys)} of the {expected} rows its manifest expects", "regenerate"))
        return None
    return keys


def _unexpected_rows(keys: set, manifest: dict[str, Any]) -> str | None:
    """Rows the manifest does not account for: more than it expects, or of samples it did not keep."""
    expected = manifest.get("rows_expected")
    if isinstance(expected, int) and len(keys) > expected:
        return f"holds {len(keys)} rows, more than the {expected} its manifest expects"
    kept = _kept_sample_ids(manifest)
    if kept is None:
        return None
    foreign = sorted({str(key[0]) for key in keys} - kept)
    if foreign:
        return f"holds rows of {len(foreign)} sample(s) its manifest did not keep (e.g. {foreign[:3]})"
    return None


def _kept_sample_ids(manifest: dict[str, Any]) -> set[str] | None:
    """The sample ids the manifest says the cell kept (None where it records none)."""
    samples = manifest.get("samples")
    kept = samples.get("kept_ids") if isinstance(samples, dict) else None
    if kept is None:  # manifests before kept_ids: a stateful cell recorded its samples' order
        state = manifest.get("method_state")
        kept = state.get("sample_order") if isinstance(state, dict) else None
    return {str(i) for i in kept} if isinstance(kept, list) else None
