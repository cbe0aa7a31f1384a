"""The benchmark runner: one cell = one (model, dataset, decoding params) point, every arm on the same samples.

Typical use (what ``python -m lade_bench.run`` does for each cell of a sweep)::

    register_configs()                     # the structured schema, before Hydra composes
    outcome = run_cell(cfg, default_sinks(cfg))

Modules: ``config_schema`` (Hydra schema), ``plan`` (validation, cell id, folder), ``samples``
(dataset and prompt-length filter), ``execute`` (the timed loop), ``timing`` (the one timing
harness, shared with the tuner, ``bench`` and ``gpu_check``), ``arms`` (dispatch to the method
registry, ``lade_bench.methods``), ``rows`` and ``scoring`` (row building and the dataset's declared
scorer), ``summary`` (per-cell numbers), ``console`` (progress and table), ``sinks`` (where results
are handed on), ``cell`` (one cell end to end), ``ranks`` (multi-device cells under torchrun: rank 0
leads, the others serve its requests; ``rank_env`` what a job reads of torchrun before torch loads)
and ``job`` (the Hydra job wrapper, which plans the cell before it imports the engine).

The names below are imported on first use: the entry point imports ``config_schema`` before Hydra
composes, and a typo on the command line should be reported in a second, not after torch and
transformers have loaded.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CellConfigError": "lade_bench.runner.plan",
    "CellOutcome": "lade_bench.runner.cell",
    "CellPlan": "lade_bench.runner.plan",
    "LadeBenchConfig": "lade_bench.runner.config_schema",
    "Sink": "lade_bench.runner.sinks",
    "default_sinks": "lade_bench.runner.sinks",
    "plan_cell": "lade_bench.runner.plan",
    "register_configs": "lade_bench.runner.config_schema",
    "run_cell": "lade_bench.runner.cell",
    "run_job": "lade_bench.runner.job",
    "summarize_cell": "lade_bench.runner.summary",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import an exported name from its module on first access (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lade_bench.runner' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return __all__
