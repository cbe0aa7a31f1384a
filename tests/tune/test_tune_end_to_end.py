"""The tuner end to end on the tiny model: killed mid-search, resumed, validated, preset run by ``lade_bench.run``.

One tune serves every test of this module (a module fixture): a child of the CLI server runs it and is
SIGKILLed inside its third measured configuration, then the same command runs again in-process and finishes.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import optuna
import pandas as pd
import pytest
import yaml
from hydra import compose, initialize_config_dir
from optuna.trial import TrialState

from lade_bench.report.build import build_report
from lade_bench.report.tune_figure import draw_tune_figure
from lade_bench.results import load_rows
from lade_bench.runner import run_cell
from lade_bench.tune.outputs import format_speedup
from lade_bench.tune.search import STUDY_DB, STUDY_NAME, config_key, params_of
from lade_bench.tune.tuner import run_tune

from .conftest import CONF_DIR, TINY_TUNE, compose_tune, tmp_outputs

# One real tune (killed mid-trial, then resumed) serves the module: end to end, the slow lane.
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
TRIALS = 5
KILL_IN = 3  # the kill comes inside the third configuration measured


def _study_trials(tune_dir: Path) -> list[optuna.trial.FrozenTrial]:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tune_dir / STUDY_DB}")
    return optuna.load_study(study_name=STUDY_NAME, storage=storage).get_trials(deepcopy=False)


@pytest.fixture(scope="module")
def tune(tmp_path_factory, cli_server):
    """Run a tune, kill it mid-trial, resume it; return what the tests look at."""
    root = tmp_path_factory.mktemp("tune")
    # Pruning off: every configuration is measured, so the third measured one (where the kill comes)
    # exists whatever the timings (pruning has its own tests in test_tune_bound.py).
    overrides = [*TINY_TUNE, *tmp_outputs(root), f"tune.trials={TRIALS}", "tune.name=t", "tune.prune=false"]
    # `python -m lade_bench.tune`, forked from the CLI server with kill_mid_trial's patch (no interpreter start).
    patch = (str(HERE / "kill_mid_trial.py"), KILL_IN)
    log = root / "killed.log"
    killed = cli_server.start(overrides, cwd=root, output=log, module="lade_bench.tune", patch=patch, timeout=300)
    assert killed.wait(kill_group=True) == -signal.SIGKILL, log.read_text()[-3000:]
    tune_dir = root / "tunes" / "t"
    before = _study_trials(tune_dir)
    outcome = run_tune(compose_tune(overrides))
    return {"root": root, "tune_dir": tune_dir, "before": before, "after": _study_trials(tune_dir), "outcome": outcome}


def test_resume_reuses_finished_trials_and_measures_the_interrupted_one_again(tune):
    before, after = tune["before"], tune["after"]
    finished = (TrialState.COMPLETE, TrialState.PRUNED)
    done_before = [t for t in before if t.state in finished]
    running = [t for t in before if t.state == TrialState.RUNNING]
    assert len(running) == 1  # the kill left the trial it interrupted RUNNING
    # Finished trials are reused untouched: same number, configuration, value and start time.
    by_number = {t.number: t for t in after}
    for trial in done_before:
        again = by_number[trial.number]
        assert (again.state, again.params, again.value, again.datetime_start) == (
            trial.state,
            trial.params,
            trial.value,
            trial.datetime_start,
        )
    # The interrupted trial is marked failed and its configuration measured again, first.
    assert by_number[running[0].number].state == TrialState.FAIL
    retries = [t for t in after if t.user_attrs.get("retry_of") == running[0].number]
    assert len(retries) == 1 and retries[0].params == running[0].params
    assert retries[0].state in finished
    # Exactly TRIALS distinct configurations evaluated over both runs, each once.
    record = json.loads((tune["tune_dir"] / "tune_record.json").read_text())
    keys = [c["config"] for c in record["configurations"]]
    assert len(keys) == TRIALS == len(set(keys))
    evaluated_after = [t for t in after if t.state in finished and "repeat_of" not in t.user_attrs]
    assert sorted(config_key(params_of(t.params)) for t in evaluated_after) == sorted(keys)


def test_record_lists_every_configuration_with_bound_and_fate(tune):
    record = json.loads((tune["tune_dir"] / "tune_record.json").read_text())
    probe, heldout = record["probe_sample_ids"], record["heldout_sample_ids"]
    assert len(probe) == len(heldout) == 2 and not set(probe) & set(heldout)
    for conf in record["configurations"]:
        assert conf["prior_bound"] > 0
        if conf["pruned"]:
            assert conf["pruned_by"] in ("prior bound", "measured bound")
        else:
            assert conf["probe"]["n_units"] == 4  # 2 samples x 2 MT-Bench turns
            assert conf["probe_speedup"] == pytest.approx(conf["probe"]["speedup"])
            assert conf["probe"]["mismatches"] == 0  # greedy lookahead is exact
            # The probe units are the probe samples' turns, never a held-out one.
            assert {u.split("/")[0] for u in conf["probe"]["units"]} == set(probe)
    measured = sorted((c for c in record["configurations"] if not c["pruned"]), key=lambda c: -c["probe_speedup"])
    top = [c["config"] for c in measured[:2]]
    # The declared top-k in search order, then the reference preset (never a candidate).
    assert [h["config"] for h in record["heldout"]] == [*top, "N4W3G3ref-flat"]
    assert [h["reference"] for h in record["heldout"]] == [None] * len(top) + ["cpu_small"]
    # Declared before validation: the search's rank 1, whatever the held-out numbers say.
    assert record["winner_rule"] == "search_rank_1" and record["winner"] == top[0]
    assert [h["selected"] for h in record["heldout"]] == [True, *[False] * len(top)]
    assert record["report_sample_ids"] == record["heldout_sample_ids"] and record["selection_sample_ids"] == []
    assert record["profile"]["token_counts"][-1] >= 15  # covers the widest step of the space


def test_heldout_cells_run_every_arm_on_the_heldout_samples_only(tune):
    record = json.loads((tune["tune_dir"] / "tune_record.json").read_text())
    for entry in record["heldout"]:
        rows = load_rows(entry["cell_dir"])
        assert set(rows["arm"]) == {"ar", "lookahead", "prompt_lookup"}
        assert set(rows["sample_id"]) == set(record["heldout_sample_ids"])
        assert rows["error"].isna().all()
        assert rows.loc[rows["arm"] == "lookahead", "matches_ar"].all()
        assert set(rows["verification"].dropna()) == {entry["verification"]}
        lookahead = entry["arms"]["lookahead"]
        assert lookahead["n_units"] == 2
        # Two samples are too few for an interval: the reason is given instead.
        assert lookahead["speedup_ci_low"] is None and "no interval" in lookahead["speedup_ci_note"]
    table = (tune["tune_dir"] / "heldout.md").read_text()
    assert "(declared winner)" in table and "(not selected)" in table and "no interval: 2 samples" in table
    assert "rank 1 (rule tune.winner=search_rank_1" in table
    assert "cpu_small: N4W3G3ref-flat (reference preset, not a candidate)" in table
    csv = pd.read_csv(tune["tune_dir"] / "heldout.csv")
    assert list(csv["config"]) == [h["config"] for h in record["heldout"]]


def test_preset_is_written_and_run_loads_it_by_name(tune, tmp_path):
    outcome = tune["outcome"]
    preset = outcome.preset
    assert preset.parent == tune["root"] / "conf" / "lookahead" / "tuned"
    values = yaml.safe_load(preset.read_text())
    winner = next(h for h in json.loads(outcome.record.read_text())["heldout"] if h["winner"])
    # The header quotes the declared winner's own held-out number (no selection on those samples).
    quoted = f"Declared winner's speedup over AR on the held-out samples: {format_speedup(winner['arms']['lookahead'])}"
    assert quoted in preset.read_text() and "declared winner: search rank 1" in preset.read_text()
    expected = {k: winner[k] for k in ("ngram", "window", "guesses", "prompt_as_reference", "verification")}
    assert values == expected
    # Composed exactly as `python -m lade_bench.run lookahead=tuned/<name> hydra.searchpath=[...]`, then run.
    overrides = [
        f"lookahead=tuned/{preset.stem}",
        f"hydra.searchpath=[file://{tune['root'] / 'conf'}]",
        "model=tiny_llama",
        "dtype=float64",
        "device=cpu",
        "dataset.limit=1",
        "max_new_tokens=8",
        "wandb.mode=disabled",
        "device_profile.enabled=false",
        f"output_root={tmp_path / 'runs'}",
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    assert {k: cfg.lookahead[k] for k in expected} == expected
    result = run_cell(cfg)
    rows = load_rows(result.cell_dir)
    assert result.status == "done" and rows["error"].isna().all()
    assert set(rows["ngram"]) == {expected["ngram"]} and set(rows["verification"]) == {expected["verification"]}


def test_figure_and_report_include_the_tune(tune, tmp_path):
    outcome = tune["outcome"]
    assert outcome.figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert outcome.figure.with_suffix(".pdf").is_file()
    report = build_report(tune["tune_dir"], tmp_path / "report", n_boot=50)
    assert "tune_step_cost" in [f.name for f in report.figures]
    assert 'id="fig-tune_step_cost"' in report.html.read_text()
    # Every held-out candidate is listed once in the figure's box, by rank, with its held-out speedup.
    record = json.loads(outcome.record.read_text())
    texts = [t.get_text() for t in draw_tune_figure(record).axes[0].texts]
    box = next(t for t in texts if t.startswith("stars, by search rank:"))
    candidates = [h for h in record["heldout"] if not h["reference"]]
    assert len(box.splitlines()) == 1 + len(candidates)
    for h in candidates:
        assert f"{h['rank_in_search']}: {h['config']}, " in box and "held-out (n=" in box


def test_a_rerun_of_a_finished_tune_measures_nothing_new(tune):
    trials_before = len(tune["after"])
    overrides = [*TINY_TUNE, *tmp_outputs(tune["root"]), f"tune.trials={TRIALS}", "tune.name=t", "tune.prune=false"]
    run_tune(compose_tune(overrides))
    assert len(_study_trials(tune["tune_dir"])) == trials_before
    assert not os.path.exists(tune["tune_dir"] / "tune.lock")
