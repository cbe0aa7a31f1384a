"""Hydra callback: refuse, in one line, an output folder that cannot be written, before Hydra writes there.

Hydra creates its own run folder (``hydra.run.dir``, under ``output_root``) before the job starts, so a
read-only or full ``output_root`` would otherwise end in Hydra's traceback instead of the runner's
one-line error (``runner.job.describe_write_error``). Registered in ``conf/config.yaml`` under
``hydra.callbacks``, before the launch plan (which writes there too).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


class RequireWritableOutput(Callback):
    """Exits with the runner's storage-error status when ``<output_root>/<sweep_name>`` is not writable."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check before a single run's Hydra folder is made."""
        require_writable(Path(config.output_root).expanduser() / config.sweep_name)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check before a multirun's sweep folder and launch plan are written."""
        require_writable(Path(config.output_root).expanduser() / config.sweep_name)


def require_writable(folder: Path) -> None:
    """Create ``folder`` and a file in it, or log the one-line reason and exit (status 1).

    Raises:
        SystemExit: the folder cannot be created or written (read-only, full, no permission).
    """
    from lade_bench.runner.job import STORAGE_ERROR_EXIT, describe_write_error

    probe = folder / f".write-check-{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(probe)
        log.error("%s", describe_write_error(exc))
        raise SystemExit(STORAGE_ERROR_EXIT) from exc
