"""One Hydra job = one cell: run it and turn configuration mistakes into a one-line error."""

from __future__ import annotations

import logging

from omegaconf import DictConfig

from lade_bench.datasets import DatasetFormatError, DatasetUnavailableError, UnknownDatasetError
from lade_bench.decoding import DecodingConfigError, UnsupportedModelError
from lade_bench.runner.cell import run_cell
from lade_bench.runner.plan import CellConfigError
from lade_bench.runner.sinks import default_sinks

log = logging.getLogger(__name__)

# Mistakes in the config or the environment, not bugs: a traceback would only hide the message.
USER_ERRORS = (
    DecodingConfigError,
    CellConfigError,
    UnknownDatasetError,
    DatasetUnavailableError,
    DatasetFormatError,
    UnsupportedModelError,
    FileNotFoundError,
)

# Exit status for a configuration error (argparse's convention for bad usage).
CONFIG_ERROR_EXIT = 2


def run_job(cfg: DictConfig) -> None:
    """Run the cell ``cfg`` describes with the default sinks; exit with status 2 on a config error."""
    try:
        run_cell(cfg, default_sinks(cfg))
    except USER_ERRORS as exc:
        log.error("%s", exc)
        raise SystemExit(CONFIG_ERROR_EXIT) from exc
