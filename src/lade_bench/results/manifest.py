"""Provenance of a run: code version, package versions, machine, seeds."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from lade_bench.results.cell_check import read_json_object
from lade_bench.results.schema import SCHEMA_VERSION

# Distributions whose version can change a number in the results table.
TRACKED_PACKAGES: tuple[str, ...] = (
    "torch",
    "transformers",
    "lade_bench",
    "datasets",
    "hydra-core",
    "wandb",
    "pandas",
    "pyarrow",
)

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
# Version of the manifest's own layout. 2: the runner adds ``device_profile_key`` and
# ``timing_conditions`` (see ``runner.conditions``); manifests without this field are version 1.
MANIFEST_VERSION = 2


def git_state(directory: str | Path = _PACKAGE_DIR) -> tuple[str | None, bool | None]:
    """Return ``(HEAD sha, dirty)`` of the git checkout containing ``directory``, or ``(None, None)``.

    ``(None, None)`` covers "not a checkout" (e.g. an installed wheel), no ``git`` binary, and git
    refusing the repository. Untracked files count as dirty: a new, uncommitted module changes what
    ran just as much as an edited one (``runs/`` and other outputs are git-ignored, so they do not).
    """
    sha = _git(directory, "rev-parse", "HEAD")
    if sha is None:
        return None, None
    status = _git(directory, "status", "--porcelain")
    return sha, (None if status is None else bool(status))


def _git(directory: str | Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(directory), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution in ``names``; ``None`` for one that is not installed."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def build_manifest(seeds: dict, device: str, extra: dict | None = None) -> dict:
    """Build the provenance record written as ``manifest.json`` beside a cell's rows.

    Args:
        seeds: every seed that influenced the run, by name (e.g. ``{"global": 0, "sampling": 1}``).
        device: human-readable device, e.g. ``"cuda:0 NVIDIA H200"`` or ``"cpu"``; the caller knows
            it without this module importing torch.
        extra: more top-level fields (e.g. the command line); may not overwrite the standard ones.

    Returns:
        A JSON-serialisable dict with ``manifest_version``, ``git_sha``, ``git_dirty``, ``packages``,
        ``python``, ``platform``, ``device``, ``seeds``, ``row_schema_version`` and ``created_utc``
        (ISO 8601).

    Raises:
        ValueError: ``extra`` repeats a standard field.
    """
    sha, dirty = git_state()
    manifest: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,
        "git_sha": sha,
        "git_dirty": dirty,
        "packages": package_versions(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "device": device,
        "seeds": dict(seeds),
        "row_schema_version": SCHEMA_VERSION,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if extra:
        if not isinstance(extra, Mapping):
            raise ValueError(f"extra must be a mapping, got {type(extra).__name__}")
        clash = sorted(set(extra) & set(manifest))
        if clash:
            raise ValueError(f"extra may not overwrite manifest field(s): {', '.join(clash)}")
        manifest.update(extra)
    return manifest


def earlier_runs(path: Path) -> list[dict[str, Any]]:
    """The runs a cell's existing manifest records, oldest first (its ``previous_runs``, then itself).

    A resumed cell's rows may come from several runs (other commits, machines or loads), so the
    manifest of the run that resumes it keeps each earlier run's provenance under ``previous_runs``.
    Empty when the cell has no manifest yet.
    """
    if not path.is_file():
        return []
    earlier = read_json_object(path)
    return [*earlier.pop("previous_runs", []), earlier]


def runs_named_by_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The runs that wrote ``rows``, in the order of their first row, as ``previous_runs`` records.

    For a cell whose manifest was unreadable and set aside (``manifest.json.damaged``): each row names
    its run (``run_id``, ``job_id``, ``host``), so the new manifest still says which runs timed the rows
    it keeps, with the count of rows each wrote, and that the rest of their record was lost.
    """
    runs: dict[Any, dict[str, Any]] = {}
    for row in rows:
        run_id = row.get("run_id")
        if run_id not in runs:
            runs[run_id] = {
                "run": {"run_id": run_id, "job_id": row.get("job_id"), "host": row.get("host")},
                "rows": 0,
                "recovered_from": "rows.jsonl: the cell's manifest was unreadable (kept as manifest.json.damaged); "
                "this run's code version, packages and timing conditions are not known",
            }
        runs[run_id]["rows"] += 1
    return list(runs.values())
