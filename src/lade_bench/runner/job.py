"""One Hydra job = one cell: run it and turn configuration mistakes into a one-line error.

On a multi-device cell (``lookahead.devices`` > 1 under torchrun) rank 0 runs the cell and the other
ranks serve its requests (``runner.ranks``): they write nothing.
"""

from __future__ import annotations

import dataclasses
import logging

from omegaconf import DictConfig

from lade_bench.datasets import DatasetFormatError, DatasetUnavailableError, UnknownDatasetError
from lade_bench.decoding import DecodingConfigError, UnsupportedModelError
from lade_bench.runner.arms import generate
from lade_bench.runner.cell import load_cell_model, run_cell
from lade_bench.runner.plan import CellConfigError, CellPlan, plan_cell
from lade_bench.runner.ranks import Ranks, RanksError, join_ranks, launched_world_size
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
    RanksError,
)

# Exit status for a configuration error (argparse's convention for bad usage).
CONFIG_ERROR_EXIT = 2


def run_job(cfg: DictConfig) -> None:
    """Run the cell ``cfg`` describes with the default sinks; exit with status 2 on a config error."""
    try:
        if cfg.lookahead.devices == 1 and launched_world_size() == 1:
            run_cell(cfg, default_sinks(cfg))
            return
        plan = plan_cell(cfg)  # every rank checks the config before joining the others
        ranks = join_ranks(cfg.lookahead.devices, plan.device, cfg.distributed.timeout_s)
        if ranks.is_leader:
            _lead(cfg, ranks)
        else:
            serve_requests(plan, ranks)
    except USER_ERRORS as exc:
        log.error("%s", exc)
        raise SystemExit(CONFIG_ERROR_EXIT) from exc


def _lead(cfg: DictConfig, ranks: Ranks) -> None:
    """Rank 0: run the cell, then release the other ranks (also when the cell failed)."""
    try:
        run_cell(cfg, default_sinks(cfg), ranks=ranks)
    finally:
        # After a failure inside a parallel generation the others wait in a collective, not for a
        # request: they fail on their own once this process is gone (or distributed.timeout_s passes).
        if not ranks.in_step:
            try:
                ranks.request(["stop"])
            except RanksError as exc:
                log.warning("could not release the other ranks: %s", exc)


def serve_requests(plan: CellPlan, ranks: Ranks) -> None:
    """Ranks other than 0: load the model(s) and run the generations rank 0 asks for, until "stop"."""
    cell_model = None
    while True:
        message = ranks.receive()
        kind = message[0]
        if kind == "stop":
            return
        if kind == "load":
            cell_model = load_cell_model(plan, ranks)
        elif kind == "generate":
            _, arm, prompt_ids, seed, budget, stop_ids = message
            generate(arm, dataclasses.replace(cell_model, stop_ids=stop_ids), prompt_ids, plan, seed, budget)
        else:
            raise RanksError(f"rank {ranks.rank}: unknown request {kind!r} from rank 0 (ranks run different code?)")
