"""`+sweep=spec_bench` plans, through Hydra's real multirun grid and the real plan, two cells over every
Spec-Bench group under Spec-Bench's warm-state scope (one state across the benchmark, its warm-up first):
every training-free method at Spec-Bench's own lookahead setting, and lookahead at the paper's per-model
setting beside an AR of its own (nothing runs a model)."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from lade_bench.methods import get_method
from lade_bench.methods.registry import REPLICA, every_method_arms
from lade_bench.runner import plan_cell
from lade_bench.runner.plan import CellConfigError

from ..methods import toy_drafter
from .conftest import REPO

# Read from the registry (conf/spec_bench/every_method.yaml); REST, which needs a datastore, has its own cell.
EVERY_METHOD = every_method_arms()
# The committed Spec-Bench sweep's cells (paper_figures/spec_bench), each with the config it ran.
COMMITTED_CELLS = REPO / "paper_figures" / "spec_bench" / "rows" / "spec_bench" / "cells.json"


def _committed_every_method_arms() -> set[tuple[str, ...]]:
    """The arms of the committed every-method cells (the cells of more than AR and one method)."""
    configs = [yaml.safe_load(cell["config_text"]) for cell in json.loads(COMMITTED_CELLS.read_text())]
    return {tuple(config["arms"]) for config in configs if len(config["arms"]) > 2}


def _grid(compose_cfg) -> list[list[str]]:
    cfg = compose_cfg(["+sweep=spec_bench"], hydra=True)
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN" and cfg.sweep_name == "spec_bench"
    params = dict(cfg.hydra.sweeper.params)
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
    axes = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] for o in parsed]
    return [list(cell) for cell in itertools.product(*axes)]


def test_the_sweep_plans_two_cells_over_every_group_with_spec_bench_s_warm_state_scope(compose_cfg):
    plans = [plan_cell(compose_cfg(["+sweep=spec_bench", *cell])) for cell in _grid(compose_cfg)]
    assert len({p.cell_id for p in plans}) == len(plans) == 2
    settings = {}
    for plan in plans:
        # Every group in one cell (the leaderboard splits its rows by group), as Spec-Bench's one process runs them.
        assert "categories" not in plan.semantic["dataset"] and plan.dataset.get("categories") is None
        assert plan.arms[0] == "ar" and plan.dataset_spec.name == "spec_bench"
        assert (
            plan.semantic["max_new_tokens"] == 1024 and plan.semantic["model"]["name_or_path"] == "lmsys/vicuna-7b-v1.3"
        )
        # Spec-Bench's warm-up (eval.py): the first question, every turn, 3 times, with the full token budget.
        assert (plan.counts.warmup, plan.counts.warmup_new_tokens) == (3, 1024)
        la = plan.settings["lookahead"]
        settings[plan.arms] = (la.ngram, la.window, la.guesses, la.prompt_as_reference)
    # Spec-Bench's eval.sh (--level 5 --window 7 --guess 7, no POOL_FROM_PROMPT) and the paper's 7B preset.
    assert settings == {EVERY_METHOD: (5, 7, 7, False), ("ar", "lookahead"): (5, 15, 15, True)}
    # One state per stateful arm over the whole benchmark, in the id; the lookahead cell carries none.
    every = next(p for p in plans if p.arms == EVERY_METHOD)
    # Its warm-up runs on that state, so the warm-up enters the id with it.
    state = {"mode": "warm", "scope": "benchmark", "warmup": 3, "warmup_new_tokens": 1024}
    assert every.semantic["method_state"] == state
    assert "method_state" not in next(p for p in plans if p.arms != EVERY_METHOD).semantic
    # A group of its own is the per-cell scope's, said in one line with the fix.
    with pytest.raises(CellConfigError, match=r"not dataset.categories=\['qa'\]: drop dataset.categories"):
        plan_cell(compose_cfg(["+sweep=spec_bench", "dataset.categories=[qa]"]))
    per_group = plan_cell(compose_cfg(["+sweep=spec_bench", "dataset.categories=[qa]", "method_state.scope=cell"]))
    assert per_group.semantic["method_state"]["scope"] == "cell"
    assert every.settings["prompt_lookup"].max_ngram_size == 3  # PLD's and Spec-Bench's n-gram
    assert all(get_method(arm).models == (REPLICA,) for arm in EVERY_METHOD)  # no draft model, no extra ranks
    headline = compose_cfg(["+sweep=spec_bench"]).report.headline
    assert (headline.ngram, headline.window, headline.guesses, headline.prompt_as_reference) == (5, 7, 7, False)


def test_the_every_method_cell_takes_every_registered_drafter_from_the_registry(compose_cfg):
    """The registry gives every arm of the committed cells, in their order (the built-ins' ids stay); a drafter
    declared and registered later joins the cell, last, without an edit to its config; REST, whose default
    datastore is built beforehand, never does."""
    cell = ["+sweep=spec_bench"]
    (committed,) = _committed_every_method_arms()
    arms = plan_cell(compose_cfg(cell)).arms
    assert tuple(arm for arm in arms if arm in committed) == committed
    with toy_drafter.registered() as toy:
        assert plan_cell(compose_cfg(cell)).arms == (*arms, toy)
    assert "rest" not in arms and get_method("rest").needs_resource


def test_the_cpu_recipe_overrides_the_sweep(compose_cfg):
    recipe = ["model=smollm2", "dataset.per_category_limit=10", "max_new_tokens=128", "dataset.path=question.jsonl"]
    plan = plan_cell(
        compose_cfg(["+sweep=spec_bench", "spec_bench=paper_lookahead", "dataset.categories=[rag]", *recipe])
    )
    assert plan.arms == ("ar", "lookahead") and plan.semantic["dataset"]["per_category_limit"] == 10
    assert plan.semantic["model"]["source"] == "embedded" and plan.semantic["max_new_tokens"] == 128
    thirteen = plan_cell(compose_cfg(["+sweep=spec_bench", "spec_bench=paper_lookahead", "lookahead=paper_13b"]))
    assert (thirteen.settings["lookahead"].window, thirteen.settings["lookahead"].guesses) == (10, 10)


def test_rest_is_a_cell_of_its_own_on_the_reference_datastore_of_its_model(compose_cfg, tmp_path):
    cfg = compose_cfg(["+sweep=spec_bench", "spec_bench=rest"], hydra=True)
    params = [f"{k}={v}" for k, v in cfg.hydra.sweeper.params.items()]
    # Hydra's sweeper lets the command line's spec_bench=rest replace the variant axis: one REST cell, every group.
    overrides = OverridesParser.create().parse_overrides([*params, "spec_bench=rest"])
    (batch,) = BasicSweeper.split_arguments(overrides, None)
    assert batch == [["spec_bench=rest"]]
    assert tuple(cfg.arms) == ("ar", "rest")
    # No datastore named: the reference datastore of Vicuna's tokenizer, refused until it is built (the
    # message gives the command); a datastore named by path as before (test_runner_rest.py).
    rest = ["+sweep=spec_bench", "spec_bench=rest", "dataset.categories=[qa]", f"model_cache_dir={tmp_path}"]
    with pytest.raises(CellConfigError, match="reference datastore for hf:lmsys/vicuna-7b-v1.3@main is not built"):
        plan_cell(compose_cfg(rest))
    with pytest.raises(CellConfigError, match="build --reference --model vicuna_7b --cache-dir"):
        plan_cell(compose_cfg(rest))
