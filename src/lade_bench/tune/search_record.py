"""An earlier tune's search, reused: its record, the check that it is the same tune, its declared top-k.

``tune.search_from`` names the ``tune_record.json`` of a finished search (or the tune folder holding
it). The tuner then runs no search: it takes that search's top-k (the order :func:`search_rank`
fixes, declared before any held-out sample) and runs only the held-out validation, on this code and
this machine. Because ``search_rank_1`` declares the winner from the search alone, the winner (and
so the preset's values) is the earlier tune's by construction; only the held-out numbers are new.
This is how a committed tune's held-out cells are regenerated, with their per-sample rows, without
re-choosing the preset that other committed results were run with.

The earlier record must describe the same tune: every field of its ``identity`` (run settings, device
kind, space, probe and held-out sample ids, top-k, baselines, reference presets, warm-up) must equal
this run's; a difference is named, field by field, before the validation starts.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lade_bench.decoding import LookaheadParams
from lade_bench.tune.config import TuneConfigError
from lade_bench.tune.search import config_key, params_of, search_rank

RECORD_JSON = "tune_record.json"
# The fields a record must hold for its search to be reused.
_NEEDED = ("identity", "configurations", "search", "stopped", "profile")


def record_path(source: Path) -> Path:
    """The record file ``tune.search_from`` names: the path itself, or ``<folder>/tune_record.json``."""
    return source / RECORD_JSON if source.is_dir() else source


def load_search_record(source: Path) -> dict[str, Any]:
    """Read the earlier tune's record and check that its search finished.

    Raises:
        TuneConfigError: no record there, it is not JSON, or it lacks a field a finished search writes.
    """
    path = record_path(source)
    if not path.is_file():
        raise TuneConfigError(
            f"tune.search_from={str(source)!r}: no {RECORD_JSON} there (give the file or its tune folder)"
        )
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TuneConfigError(
            f"tune.search_from={str(source)!r}: {path} is not a readable tune record ({err})"
        ) from err
    missing = [key for key in _NEEDED if key not in record] if isinstance(record, dict) else list(_NEEDED)
    if missing:
        raise TuneConfigError(
            f"tune.search_from={str(source)!r}: {path} lacks {missing}; only a record whose search finished "
            "(it names why the search stopped) can be reused"
        )
    return record


def check_same_tune(source: dict[str, Any], identity: dict[str, Any], fields: Iterable[str] | None = None) -> None:
    """Refuse to reuse a search made for another tune: every identity field (or those in ``fields``) must match.

    Raises:
        TuneConfigError: naming each differing field with the earlier record's value and this run's.
    """
    earlier = source["identity"]
    identity = json.loads(json.dumps(identity))  # as the record holds it: tuples become lists
    keys = list(fields) if fields is not None else sorted(set(earlier) | set(identity))
    differ = [key for key in keys if earlier.get(key) != identity.get(key)]
    if differ:
        listed = "; ".join(
            f"{key}: searched with {earlier.get(key)!r}, this run {identity.get(key)!r}" for key in differ
        )
        raise TuneConfigError(
            f"tune.search_from: the earlier search was made for another tune ({listed}); set these as it did, "
            "or run the search again (tune.search_from=null)"
        )


def declared_top_k(source: dict[str, Any], k: int) -> list[tuple[LookaheadParams, float]]:
    """The earlier search's top-``k`` measured configurations, best first, with their probe speedups."""
    measured = [
        c
        for c in source["configurations"]
        if not c["pruned"] and c["probe_speedup"] is not None and math.isfinite(float(c["probe_speedup"]))
    ]
    measured.sort(key=lambda c: search_rank(float(c["probe_speedup"]), int(c["trial"])))
    top = []
    for c in measured[:k]:
        params = params_of(c)
        if config_key(params) != c["config"]:
            raise TuneConfigError(f"tune.search_from: configuration {c['config']!r} does not match its own settings")
        top.append((params, float(c["probe_speedup"])))
    if not top:
        raise TuneConfigError("tune.search_from: the earlier search measured no configuration; nothing to validate")
    return top


def search_part(source: dict[str, Any], source_path: Path) -> dict[str, Any]:
    """The record fields that come from the earlier search, and where they came from (path and sha256)."""
    path = record_path(source_path)
    return {
        "search": source["search"],
        "configurations": source["configurations"],
        "stopped": source["stopped"],
        "search_from": {
            "record": str(path.resolve()),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            # A record that itself reused a search points further back.
            "earlier": source.get("search_from"),
        },
    }
