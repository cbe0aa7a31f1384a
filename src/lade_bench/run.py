"""Hydra entry point: ``python -m lade_bench.run [+sweep=NAME] [overrides...]``.

Thin on purpose: Hydra composes the config (``conf/`` at the repository root, checked against the
structured schema) and :func:`lade_bench.runner.run_cell` does the work, once per cell of a sweep.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from lade_bench.runner.config_schema import register_configs

# Relative to this file: src/lade_bench/run.py -> <repository>/conf (an editable install runs from
# the checkout, which is where conf/ and the runs/ output root live).
CONFIG_PATH = "../../conf"


@hydra.main(config_path=CONFIG_PATH, config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    from lade_bench.runner import run_job

    run_job(cfg)


def main() -> None:
    """Register the config schema, then let Hydra parse the command line and run each job."""
    register_configs()
    _hydra_main()


if __name__ == "__main__":
    main()
