"""Shared fixtures: tiny models of every architecture, the embedded models, paths to shared data."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch

from lade_bench.models.tiny import TINY_ARCHITECTURES, tiny_model

from .runner.cli_server import CliServer

# pytest >= 9 attaches its log capture to every logger that does not propagate, and torch's
# structured trace (logger "torch.__trace", non-propagating on purpose) builds its payloads whenever
# that logger has a handler: every torch.compile then serialises each graph it makes into the captured
# log, a large slowdown of the compiled tests for records nobody reads. Propagating, the logger keeps
# only torch's own lazy handler, which removes itself at its first record when no TORCH_TRACE is set.
logging.getLogger("torch.__trace").propagate = True


def pytest_configure(config):
    """Under pytest-xdist, one torch thread per worker, in the worker and in every process it starts.

    The suite runs on as many workers as the machine has cores (``-n auto`` in pyproject.toml). A
    worker left at torch's default starts one intra-op thread per core, and the workers' threads then
    fight over the same cores (on a 2-core host the suite took 17-22 min on two workers with one
    thread each, 37 min serially; with two threads each it ran well behind the one-thread pace until stopped).
    OpenMP reads ``OMP_NUM_THREADS`` in every process the tests start (the CLI runs, torchrun ranks), so
    they use one thread too, and a device profile measured in the worker has the same thread count as
    one measured by a CLI run of the same test.
    """
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers:
        threads = max(1, len(os.sched_getaffinity(0)) // int(workers))
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_models() -> dict[str, torch.nn.Module]:
    """One float64 tiny model per architecture, peaky enough that guesses get verified often."""
    return {arch: tiny_model(arch, init_scale=3.0, seed=7) for arch in TINY_ARCHITECTURES}


@pytest.fixture(scope="session")
def smollm2():
    """(model, tokenizer) of the embedded SmolLM2-135M-Instruct, fp32 on CPU."""
    from lade_bench.models.embedded import load_embedded_smollm2

    return load_embedded_smollm2()


@pytest.fixture(scope="session")
def gemma3():
    """(model, tokenizer) of the embedded Gemma-3-270M base, fp32 on CPU (converted once into the cache)."""
    from lade_bench.models.gemma3 import load_embedded_gemma3

    return load_embedded_gemma3()


def pytest_addoption(parser):
    """``--shared-data``: the real benchmark files; ``--slurm-cluster``: the Slurm cluster tests/slurm runs on."""
    parser.addoption(
        "--shared-data",
        default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"),
        help="folder holding gsm8k/test.jsonl and classeval/ClassEval_data.json "
        "(default: shared/data beside the checkout, where CI lays it)",
    )
    parser.addoption(
        "--slurm-cluster",
        default=None,
        help="a cluster description (YAML: slurm_conf, shared_dir, overrides) to run tests/slurm against a real "
        "Slurm cluster; scripts/slurm_cluster.sh start writes one for a one-node cluster on this machine "
        "(without it those tests skip)",
    )


@pytest.fixture(scope="session")
def shared_data_dir(request) -> Path:
    """The read-only shared data folder (never copied into the repository)."""
    path = Path(request.config.getoption("--shared-data"))
    if not path.is_dir():
        pytest.skip(f"shared data folder not found at {path}: pass --shared-data=DIR")
    return path


@pytest.fixture(scope="session")
def cli_server(tmp_path_factory):
    """The CLI server of this pytest worker (runner/cli_server.py): the CLI's modules imported once, each
    run of ``python -m lade_bench.run`` or ``python -m lade_bench.tune`` forked from it."""
    server = CliServer(tmp_path_factory.mktemp("cli_server") / "server.log")
    yield server
    server.close()
