"""A log file per run of a cell, in the cell's folder: ``<cell dir>/logs/<run id>.log``.

On a cluster a job's own log lies with the scheduler's files (submitit's folder, Ray's session
logs); this copy sits beside the results it explains, named by the run id that every row of the
run carries. It takes this process's log records while the cell runs (INFO and up, as the console
shows them) and, if the cell fails, the traceback.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

LOGS_DIR = "logs"
_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"


class _FileOnFirstRecord(logging.FileHandler):
    """A file handler that creates its folder and file only when a record arrives, and never fails.

    The file is a copy of what the console shows; when it cannot be written (a full disk, the very
    error the cell is failing with) it goes quiet instead of printing a traceback per record or, on
    close, replacing the cell's own error with its own.
    """

    broken = False

    def _open(self):  # noqa: ANN202 - the base class's signature
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()

    def emit(self, record: logging.LogRecord) -> None:
        """Write the record, unless an earlier write failed."""
        if not self.broken:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - the base class's name
        """Stop writing (the console has the same records)."""
        self.broken = True

    def close(self) -> None:
        """Close the file; a flush that fails on a full disk is dropped with the rest of the copy."""
        try:
            super().close()
        except OSError:
            self.broken = True
            stream, self.stream = self.stream, None
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


@contextlib.contextmanager
def run_log(cell_dir: Path, run_id: str) -> Iterator[Path]:
    """Copy this process's log records to ``<cell_dir>/logs/<run_id>.log`` inside the ``with`` block.

    The file is created on the first record, so a run that logs nothing leaves nothing behind.
    """
    path = Path(cell_dir) / LOGS_DIR / f"{run_id}.log"
    handler = _FileOnFirstRecord(path, encoding="utf-8", delay=True)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield path
    except BaseException as exc:
        # Into this file only: the console (Hydra, the scheduler's log) reports the exception itself.
        record = logging.makeLogRecord(
            {"name": __name__, "levelno": logging.ERROR, "levelname": "ERROR", "msg": f"the run ended with {exc!r}"}
        )
        record.exc_info = (type(exc), exc, exc.__traceback__)
        handler.handle(record)
        raise
    finally:
        root.removeHandler(handler)
        handler.close()
