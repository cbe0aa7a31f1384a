"""Hydra entry point: ``python -m lade_bench.run [+sweep=NAME] [overrides...]``.

Thin on purpose: Hydra composes the config (``conf/``, shipped as ``lade_bench.conf``, checked against the
structured schema) and :func:`lade_bench.runner.run_cell` does the work, once per cell of a sweep.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile

import hydra
from omegaconf import DictConfig

from lade_bench.conf import ignore_missing_user_conf_dir
from lade_bench.runner.config_schema import register_configs

# The package lade_bench.conf (edited in the top-level conf/, shipped in the wheel): found by import, so an
# editable install and an installed wheel compose the same configs.
CONFIG_PATH = "pkg://lade_bench.conf"


@hydra.main(config_path=CONFIG_PATH, config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    from lade_bench.runner import run_job

    run_job(cfg)


def main() -> None:
    """Register the config schema, then let Hydra parse the command line and run each job."""
    register_configs()
    ignore_missing_user_conf_dir()
    # A log file that cannot be written (a full disk) must not print a traceback per record: the run
    # ends with one line naming the results file that failed (runner.job), which is what to act on.
    logging.raiseExceptions = False
    sys.argv.extend(follower_overrides(os.environ.get("RANK")))
    _hydra_main()


def follower_overrides(rank: str | None) -> list[str]:
    """Hydra overrides for a torchrun rank other than 0: its Hydra files go to a private temp folder.

    Only rank 0 writes into the sweep (results, Hydra's config and log, the launch plan); the other
    ranks run the same jobs in the same order but must not write beside it. Their log still reaches
    the terminal through torchrun; the folder is removed when the process exits.
    """
    if rank in (None, "0"):
        return []
    scratch = tempfile.mkdtemp(prefix=f"lade_bench_rank{int(rank)}_")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return [
        f"hydra.run.dir={scratch}",
        f"hydra.sweep.dir={scratch}",
        "hydra.output_subdir=null",
        "~hydra.callbacks.launch_plan",
    ]


if __name__ == "__main__":
    main()
