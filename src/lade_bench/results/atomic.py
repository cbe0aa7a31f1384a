"""Crash-safe file replacement shared by the cell writer and the sweep index."""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

# The names temp_name() makes; "target" is the file the temp file was to become.
_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[0-9a-f]{12}\.tmp")


def fsync_dir(directory: Path) -> None:
    """Flush a directory entry (a create, rename or replace) to disk.

    Without it, ``os.replace`` is atomic but not durable: after a power loss the directory may still
    point at the old file. Some filesystems refuse to fsync a directory; the rename is still atomic
    there, so the error is ignored.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_name(path: Path) -> Path:
    """A fresh temp file name beside ``path``: ``.<name>.<12 hex>.tmp`` (hidden, same directory)."""
    return path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"


class WriteFailed(OSError):
    """Writing a results file failed (out of space, read-only, I/O error); ``filename`` is the file.

    Attributes:
        needed_bytes: the size of what was being written, for the message (None where unknown).
    """

    needed_bytes: int | None = None


def write_failed(exc: OSError, path: Path, needed_bytes: int | None) -> WriteFailed:
    """``exc`` as a :class:`WriteFailed` naming ``path`` (the file being written, not a temp file)."""
    failed = WriteFailed(exc.errno, exc.strerror or str(exc), str(path))
    failed.needed_bytes = needed_bytes
    return failed


def remove_temp_files(
    directory: Path, names: Iterable[str] | None = None, older_than_s: float | None = None
) -> list[Path]:
    """Delete the temp files :func:`atomic_write` leaves when killed between create and rename.

    Only for a caller that owns ``directory`` (or the named files) right now: a temp file of a write
    still in progress would be deleted too. The runner owns its cell folder; the sweep index cleans
    its own temp files under its lock.

    Args:
        directory: where to look (not recursive); a missing directory has nothing to clean.
        names: only temp files of these target names (e.g. ``["index.jsonl"]``); None: all of them.
        older_than_s: only files last written longer ago than this; how a caller that does not own
            the directory tells a killed writer's file from one being written now.

    Returns:
        The files removed.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    wanted = None if names is None else set(names)
    removed = []
    now = time.time()
    for entry in directory.iterdir():
        match = _TEMP_NAME.fullmatch(entry.name)
        if match is None or (wanted is not None and match["target"] not in wanted) or not entry.is_file():
            continue
        with contextlib.suppress(FileNotFoundError):
            if older_than_s is not None and now - entry.stat().st_mtime <= older_than_s:
                continue
            entry.unlink()
            removed.append(entry)
    if removed:
        fsync_dir(directory)
    return removed


def atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Replace ``path`` with what ``write`` writes, all or nothing.

    The temp file lives in the same directory so that ``os.replace`` is a rename on one filesystem
    (atomic), not a copy. If ``write`` raises, the temp file is removed and ``path`` keeps its old
    content.

    Raises:
        WriteFailed: the file system refused the write (out of space, read-only, I/O error); it
            names ``path`` and the bytes that were to be written.
    """
    path = Path(path)
    # Rendered in memory first (results files are small): a failing write then knows what it needed.
    buffer = io.BytesIO()
    write(buffer)
    data = buffer.getvalue()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomically(path, data)
    except WriteFailed:
        raise
    except OSError as exc:
        raise write_failed(exc, path, len(data)) from exc


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` through a temp file beside it (the primitive of :func:`atomic_write`)."""
    # Not tempfile.mkstemp: its 0600 mode would make results unreadable to the group on a shared
    # cluster; os.open with 0o666 lets the umask decide, as for any other file.
    tmp_name = temp_name(path)
    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    fsync_dir(path.parent)


def atomic_write_json(path: Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented UTF-8 JSON (NaN allowed, as Python's ``json`` writes it)."""

    def write(handle: IO[bytes]) -> None:
        # Streamed, so a non-serialisable value deep inside fails half way through the temp file;
        # atomic_write then throws the temp file away and the old file stays.
        text = codecs.getwriter("utf-8")(handle)
        json.dump(obj, text, indent=2, ensure_ascii=False)
        text.write("\n")

    atomic_write(path, write)


def atomic_write_text(path: Path, text: str) -> None:
    """Atomically write ``text`` as UTF-8."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))
