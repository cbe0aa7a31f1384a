"""Fixtures for the runner tests: composing the real configs and running the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from lade_bench.conf import PACKAGE_CONF_DIR
from lade_bench.runner import register_configs

REPO = Path(__file__).resolve().parents[2]
CONF_DIR = PACKAGE_CONF_DIR  # the top-level conf/ (the package lade_bench.conf)
FIXTURE_DATA = REPO / "tests" / "fixtures" / "datasets"
# Small and fast on 2 cores: one question, a few tokens, the tiny llama in float64 (exact argmaxes).
# W&B and the device profile are off in unit runs; test_runner_cli checks them in one real run.
QUIET = ["wandb.mode=disabled", "device_profile.enabled=false"]
TINY = ["model=tiny_llama", "dtype=float64", "device=cpu", "dataset.limit=1", "max_new_tokens=8", *QUIET]


@pytest.fixture(scope="session", autouse=True)
def _schema_registered():
    register_configs()


@pytest.fixture
def compose_cfg():
    """``compose_cfg(overrides, hydra=False)``: the config the CLI would build, composed in-process."""

    def _compose(overrides: list[str], hydra: bool = False):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("config", overrides=list(overrides), return_hydra_config=hydra)

    return _compose


@pytest.fixture
def run_cli(tmp_path, request):
    """``run_cli(*args, env=None)``: ``python -m lade_bench.run ARGS`` in ``tmp_path``, output root there too.

    Forked from the CLI server; with ``env`` (variables the child's imports would read) a real
    ``python -m lade_bench.run`` process, interpreter start and imports included."""

    def _run(*args: str, timeout: float = 240, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        args = (*args, f"output_root={tmp_path / 'runs'}")
        if env is None:
            # Asked for here, not as an argument: a test of env runs alone starts no server.
            return request.getfixturevalue("cli_server").run(args, cwd=tmp_path, timeout=timeout)
        command = [sys.executable, "-m", "lade_bench.run", *args]
        environment = {**os.environ, **env}
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=timeout, env=environment)

    return _run


def option_names(group: str) -> list[str]:
    """Every option of a config group, from the files under ``conf/<group>/``."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def interrupt_generation_after(monkeypatch, calls: int, run) -> None:
    """Call ``run()`` with generation raising KeyboardInterrupt after ``calls`` generations, as a kill
    mid-cell would stop it (the rows of finished generations on disk, no summary); then restore it."""
    import lade_bench.runner.execute as execute_module

    original = execute_module.generate
    made = {"n": 0}

    def dies_after(*args, **kwargs):
        made["n"] += 1
        if made["n"] > calls:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(execute_module, "generate", dies_after)
    with pytest.raises(KeyboardInterrupt):
        run()
    monkeypatch.setattr(execute_module, "generate", original)


def console_states(printed: str) -> dict[str, str]:
    """The state column of the end-of-run table ``runner.console.console_summary_sink`` printed, by arm."""
    lines = [line for line in printed.splitlines() if line.startswith(("┃", "│"))]
    header = [cell.strip() for cell in lines[0].strip("┃").split("┃")]
    column = header.index("state")  # ValueError: the table has no state column
    rows = ([cell.strip() for cell in line.strip("│").split("│")] for line in lines[1:])
    return {cells[0]: cells[column] for cells in rows if cells[0]}  # a wrapped line continues the arm above
