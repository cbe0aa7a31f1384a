"""Rank processes for the lookahead-parallelism tests (spawned by test_parallel.py; not a test module).

Each rank builds the same models, runs every case of a JSON case list with ``parallel=`` set, and
writes what it generated (or the error it raised) to ``<out>/rank<k>.json``.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from lade_bench.decoding.core.params import LookaheadParams, SamplingParams
from lade_bench.decoding.lookahead.lookahead import lookahead_generate
from lade_bench.decoding.lookahead.parallel import LookaheadGroup
from lade_bench.models.tiny import tiny_model


def build_model(name: str) -> torch.nn.Module:
    """``tiny:<arch>`` (float64, as in the exactness tests) or ``smollm2`` (fp32)."""
    if name == "smollm2":
        from lade_bench.models.embedded import load_embedded_smollm2

        return load_embedded_smollm2()[0]
    return tiny_model(name.removeprefix("tiny:"), init_scale=3.0, seed=7)


def generate_case(model: torch.nn.Module, case: dict, parallel: LookaheadGroup | None) -> dict:
    """One lookahead generation of ``case``; tokens, steps and accept lengths."""
    result = lookahead_generate(
        model,
        case["prompt"],
        LookaheadParams(*case["params"]),
        case["max_new_tokens"],
        sampling=SamplingParams(**case["sampling"]),
        seed=case["seed"],
        parallel=parallel,
    )
    return {"tokens": result.tokens, "steps": result.steps, "accept_lengths": result.accept_lengths}


def run_rank(
    rank: int,
    world_size: int,
    init_file: str,
    cases_file: str,
    out_dir: str,
    timeout_s: float,
    models: dict[str, torch.nn.Module] | None = None,
) -> None:
    """Join the gloo group, run every case, write this rank's results; ``fault`` cases break one rank.

    ``models``: models by case name, built by the parent before it forked (shared copy-on-write
    instead of each rank loading SmolLM2 again); the others are built here."""
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
    )  # fmt: skip
    cases = json.loads(Path(cases_file).read_text())
    models = dict(models or {})
    results: list[dict] = []
    out = Path(out_dir) / f"rank{rank}.json"
    for case in cases:
        model = models.get(case["model"]) or models.setdefault(case["model"], build_model(case["model"]))
        fault = case.get("fault")
        if fault and fault["rank"] == rank:
            _break_after(model, fault["after_forwards"], fault["how"])
        started = time.monotonic()
        try:
            results.append(generate_case(model, case, LookaheadGroup.world()))
        except Exception as exc:  # the surviving rank's error is what the fault test checks
            results.append({"error": f"{type(exc).__name__}: {exc}", "seconds": time.monotonic() - started})
            out.write_text(json.dumps(results))
            raise
    out.write_text(json.dumps(results))
    dist.destroy_process_group()


def _break_after(model: torch.nn.Module, forwards: int, how: str) -> None:
    """Make this rank raise, exit or hang at its ``forwards``-th forward pass."""
    calls = [0]

    def hook(*_):
        calls[0] += 1
        if calls[0] < forwards:
            return
        if how == "raise":
            raise RuntimeError("injected failure on this rank")
        if how == "exit":
            os._exit(3)
        time.sleep(3600)  # "hang": alive but silent, only the collective timeout can end the peers' wait

    model.register_forward_pre_hook(hook)
