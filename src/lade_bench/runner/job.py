"""One Hydra job = one cell: run it and turn configuration mistakes into a one-line error.

On a multi-device cell (``lookahead.devices`` > 1 under torchrun) rank 0 runs the cell and the other
ranks serve its requests (``runner.ranks``): they write nothing.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from lade_bench.datasets import DatasetFormatError, DatasetUnavailableError, UnknownDatasetError
from lade_bench.decoding.core.params import DecodingConfigError, UnsupportedModelError
from lade_bench.methods.registry import cell_devices
from lade_bench.model_config import PartError
from lade_bench.runner.plan import CellConfigError, CellPlan, plan_cell
from lade_bench.runner.rank_env import RanksError, launched_world_size
from lade_bench.runner.sinks import default_sinks

if TYPE_CHECKING:
    from lade_bench.runner.ranks import Ranks

# The cell's engine (runner.cell, runner.arms, runner.ranks: torch and transformers) is imported once
# the plan has accepted the config, so a refused command costs about 1 CPU-s, not 7.

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
    PartError,  # a model fetched on request (Qwen2.5-Coder) not prepared, or a damaged part
)

# Exit status for a configuration error (argparse's convention for bad usage).
CONFIG_ERROR_EXIT = 2
# Exit status when the results cannot be written (full disk, read-only folder, I/O error).
STORAGE_ERROR_EXIT = 1


def run_job(cfg: DictConfig) -> None:
    """Run the cell ``cfg`` describes with the default sinks; exit with status 2 on a config error."""
    try:
        if cell_devices(cfg) == 1 and launched_world_size() == 1:
            sinks = default_sinks(cfg)
            plan = plan_cell(cfg)
            from lade_bench.runner.cell import run_cell

            run_cell(plan, sinks)
            return
        plan = plan_cell(cfg)  # every rank checks the config before joining the others
        from lade_bench.runner.ranks import join_ranks

        ranks = join_ranks(plan.devices, plan.device, cfg.distributed.timeout_s)
        # join_ranks raises unless devices == world size, and the single-device case returned above.
        assert ranks is not None
        if ranks.is_leader:
            _lead(plan, ranks)
        else:
            serve_requests(plan, ranks)
    except USER_ERRORS as exc:
        log.error("%s", exc)
        raise SystemExit(CONFIG_ERROR_EXIT) from exc
    except OSError as exc:  # the results cannot be written: say which file and why, not a traceback
        log.error("%s", describe_write_error(exc))
        raise SystemExit(STORAGE_ERROR_EXIT) from exc


def describe_write_error(exc: OSError) -> str:
    """One line for a failed write: the file, the reason, and for a full disk the space needed and free."""
    where = exc.filename or "a results file"
    line = f"cannot write {where}: {exc.strerror or exc}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        needed = getattr(exc, "needed_bytes", None)
        free = _free_bytes(Path(where)) if exc.filename else None
        sizes = [
            f"{_size(needed)} needed" if needed is not None else None,
            f"{_size(free)} free" if free is not None else None,
        ]
        if any(sizes):
            line += f" ({', '.join(s for s in sizes if s)})"
        line += "; free some space (or set output_root elsewhere), then rerun the same command: finished rows are kept"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        line += "; choose a writable folder with output_root=..."
    else:
        line += "; rerun the same command once the file system is healthy: finished rows are kept"
    return line


def _free_bytes(path: Path) -> int | None:
    for folder in (path, *path.parents):  # the file itself may not exist yet
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return None


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"


def _lead(plan: CellPlan, ranks: Ranks) -> None:
    """Rank 0: run the cell of ``plan``, then release the other ranks (also when the cell failed)."""
    from lade_bench.runner.cell import run_cell

    try:
        run_cell(plan, default_sinks(plan.cfg), ranks=ranks)
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
    from lade_bench.runner.arms import generate
    from lade_bench.runner.cell import load_cell_model

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
            if cell_model is None:
                raise RanksError(
                    f"rank {ranks.rank}: asked to generate before loading the model (ranks run different code?)"
                )
            generate(arm, dataclasses.replace(cell_model, stop_ids=stop_ids), prompt_ids, plan, seed, budget)
        else:
            raise RanksError(f"rank {ranks.rank}: unknown request {kind!r} from rank 0 (ranks run different code?)")
