"""Hydra entry point: ``python -m lade_bench.tune [model=...] [dataset=...] [sampling=...] [tune.*=...]``.

Composes ``conf/tune.yaml`` (the run's groups plus the ``tune`` section) and runs
:func:`lade_bench.tune.tuner.run_tune`. A bad value ends the command with a one-line error naming it,
before any model loads.
"""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig

from lade_bench.conf import ignore_missing_user_conf_dir
from lade_bench.tune.config import register_tune_configs

# The package lade_bench.conf (the top-level conf/), as lade_bench.run.
CONFIG_PATH = "pkg://lade_bench.conf"

log = logging.getLogger("lade_bench.tune")


@hydra.main(config_path=CONFIG_PATH, config_name="tune", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    import optuna

    from lade_bench.runner.job import CONFIG_ERROR_EXIT, USER_ERRORS
    from lade_bench.tune.config import TuneConfigError
    from lade_bench.tune.search import TuneIdentityError
    from lade_bench.tune.tuner import run_tune

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress bar says what each trial did
    try:
        run_tune(cfg)
    except (*USER_ERRORS, TuneConfigError, TuneIdentityError) as err:  # mistakes, not bugs: no traceback
        log.error("%s", err)
        raise SystemExit(CONFIG_ERROR_EXIT) from err


def main() -> None:
    """Register the config schemas, then let Hydra parse the command line and run the tune."""
    register_tune_configs()
    ignore_missing_user_conf_dir()
    _hydra_main()


if __name__ == "__main__":
    main()
