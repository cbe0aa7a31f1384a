"""Read an offline W&B run back from its transaction log (``run-<id>.wandb``).

wandb 0.31 no longer ships a Python reader (``wandb.sdk.internal.datastore`` is gone; the Go core
writes the file), and an offline run has no ``wandb-summary.json``. The file is a LevelDB-style log:
a 7-byte header (``":W&B"``, magic 0xBEE1, version), then 32 KiB blocks of records, each
``crc32 (uint32) | length (uint16) | type (uint8) | payload``, with FULL/FIRST/MIDDLE/LAST types for
records split across blocks; each payload is a ``wandb.proto.wandb_internal_pb2.Record``.

``run.finish()`` can return before wandb's core process has flushed the end of the log, so the reader
waits (up to ``timeout_s``) for the exit record; a torn last record counts as "not written yet".
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

_HEADER = struct.Struct("<4sHB")
_RECORD_HEADER = struct.Struct("<IHB")
_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> list[bytes]:
    ident, magic, _version = _HEADER.unpack_from(data, 0)
    assert ident == b":W&B" and magic == 0xBEE1, (ident, magic)
    out, pending, pos = [], b"", _HEADER.size
    while pos + _RECORD_HEADER.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _RECORD_HEADER.size:
            pos += left
            continue
        crc, length, kind = _RECORD_HEADER.unpack_from(data, pos)
        if kind == 0 and length == 0:  # zero padding at the end of a block
            pos += left
            continue
        payload = data[pos + _RECORD_HEADER.size : pos + _RECORD_HEADER.size + length]
        if len(payload) < length or zlib.crc32(payload, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            break  # the writer has not finished this record yet
        pos += _RECORD_HEADER.size + length
        if kind == _FULL:
            out.append(payload)
        elif kind == _FIRST:
            pending = payload
        elif kind == _MIDDLE:
            pending += payload
        elif kind == _LAST:
            out.append(pending + payload)
    return out


@dataclass
class OfflineRun:
    """What a test needs from an offline run: identity, config, summary, history keys, exit code."""

    run_id: str = ""
    project: str = ""
    group: str = ""
    name: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int | None = None


def _key(item: Any) -> str:
    return item.key if item.key else "/".join(item.nested_key)


def read_offline_run(run_dir: Path, timeout_s: float = 60.0) -> OfflineRun:
    """Parse ``<run_dir>/run-*.wandb`` (``run_dir`` = ``wandb/offline-run-...``) once its exit record is in."""
    deadline = time.monotonic() + timeout_s
    while True:
        logs = list(Path(run_dir).glob("run-*.wandb"))
        run = _parse(logs[0]) if len(logs) == 1 else OfflineRun()
        if run.exit_code is not None or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


def _parse(log: Path) -> OfflineRun:
    run = OfflineRun()
    for payload in _payloads(log.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.project, run.group = r.run_id, r.project, r.run_group
            run.name, run.job_type, run.tags = r.display_name, r.job_type, list(r.tags)
            run.config.update({_key(u): json.loads(u.value_json) for u in r.config.update})
        elif kind == "config":
            run.config.update({_key(u): json.loads(u.value_json) for u in record.config.update})
        elif kind == "summary":
            run.summary.update({_key(u): json.loads(u.value_json) for u in record.summary.update})
        elif kind == "history":
            run.history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run
