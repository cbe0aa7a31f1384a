"""Crash-safe file replacement shared by the cell writer and the sweep index."""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


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


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Replace ``path`` with what ``write`` writes, all or nothing.

    The temp file lives in the same directory so that ``os.replace`` is a rename on one filesystem
    (atomic), not a copy. If ``write`` raises, the temp file is removed and ``path`` keeps its old
    content.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not tempfile.mkstemp: its 0600 mode would make results unreadable to the group on a shared
    # cluster; os.open with 0o666 lets the umask decide, as for any other file.
    tmp_name = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
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
