"""The speedup bound on a synthetic device profile, and the search's pruning with it (real Optuna, real tiny model).

The synthetic device: a forward pass costs 1 ms up to 8 input tokens and 1/8 ms per token beyond
(t(16) = 2 ms, t(32) = 4 ms): flat, then compute-bound, like a small GPU. For the search tests its
time unit is AR's measured time per token on the tiny model, so that the bounds, which compare the
profile with AR's measured time, have known values.
"""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from lade_bench.decoding import LookaheadParams
from lade_bench.profiling.device_profile import step_cost
from lade_bench.runner.arms import generate
from lade_bench.runner.cell import load_cell_model
from lade_bench.runner.plan import plan_cell
from lade_bench.runner.samples import load_samples
from lade_bench.tune.bound import measured_bound, prior_bound, should_prune, speedup_bound
from lade_bench.tune.config import SearchSpace
from lade_bench.tune.probe import build_units, measure_config, warm_up_arm
from lade_bench.tune.search import (
    PRUNED_MEASURED,
    PRUNED_PRIOR,
    SearchSettings,
    TuneIdentityError,
    config_key,
    distributions,
    evaluated,
    open_study,
    run_search,
)
from lade_bench.tune.tuner import prepare
from lade_bench.tune.validate import cell_config

from .conftest import TINY_TUNE, compose_tune, tmp_outputs

PROFILE = {"token_counts": [1, 2, 4, 8, 16, 32, 64], "forward_time_s": [1e-3, 1e-3, 1e-3, 1e-3, 2e-3, 4e-3, 8e-3]}
SPACE = SearchSpace(ngram=(2, 3, 5), window=(1, 7), guesses=(1, 7), prompt_as_reference=(True,), verification=("flat",))
SEEDED = LookaheadParams(2, 1, 1, True, "flat")  # stands for a configuration measured earlier
CHEAP = LookaheadParams(3, 1, 1, True, "flat")  # at most (1 + 1) x 2 = 4 input tokens per step: t = t(1)
CHEAP5 = LookaheadParams(5, 1, 1, True, "flat")  # at most (1 + 1) x 4 = 8 input tokens per step: t = t(1)
WIDE = LookaheadParams(5, 7, 7, True, "flat")  # 56 input tokens per step


def test_bound_is_accepted_tokens_times_one_token_cost_over_step_cost():
    assert step_cost(PROFILE, 8) == pytest.approx(1.0)
    assert step_cost(PROFILE, 24) == pytest.approx(3.0)
    assert speedup_bound(2.0, 8, PROFILE) == pytest.approx(2.0)
    assert speedup_bound(2.0, 16, PROFILE) == pytest.approx(1.0)
    # 30 tokens over 10 steps (prefill included), 9 decode steps of 24 input tokens each: 3 / 3.
    assert measured_bound(30, 10, 9 * 24, 9, PROFILE) == pytest.approx(1.0)


def test_prior_bound_takes_n_tokens_per_step_at_the_fewest_input_tokens_that_allow_it():
    # A hit feeds the window and one candidate, (W + 1)(N - 1): N5W7 -> 32 tokens, t = 4 t(1).
    assert prior_bound(WIDE, PROFILE) == pytest.approx(5 / 4)
    assert prior_bound(CHEAP, PROFILE) == pytest.approx(3.0)
    # Without guesses every step emits one token: the bound is at most 1.
    assert prior_bound(LookaheadParams(3, 2, 0), PROFILE) == pytest.approx(1.0)
    # With AR's measured time per token (here 2 ms: host overhead on top of t(1) = 1 ms) in place of t(1).
    assert prior_bound(CHEAP, PROFILE, token_time_s=2e-3) == pytest.approx(6.0)
    assert measured_bound(30, 10, 9 * 24, 9, PROFILE, token_time_s=2e-3) == pytest.approx(2.0)


def test_prune_decision():
    assert should_prune(1.25, 2.5) and should_prune(2.5, 2.5)
    assert not should_prune(3.0, 2.5)
    assert not should_prune(0.1, None)  # nothing measured yet: nothing to beat


def test_bound_outside_the_profile_says_so():
    with pytest.raises(ValueError, match="covers 1..64 tokens"):
        speedup_bound(2.0, 100, PROFILE)


@pytest.fixture(scope="module")
def tiny_measure(tmp_path_factory):
    """The real probe measurement on the tiny model and one MT-Bench sample (two units); calls recorded.

    Also a synthetic profile in units of AR's time per token on the first unit (what the measured
    bound after one unit divides by): t(k) = tau for k <= 8, then tau / 8 per further token.
    """
    root = tmp_path_factory.mktemp("bound")
    cfg = compose_tune([*TINY_TUNE, *tmp_outputs(root)])
    plan = prepare(cfg).base_plan
    cell_model = load_cell_model(plan, None)
    units = build_units(plan, cell_model, load_samples(plan)[:1], [0])
    calls: list[str] = []

    def measure(params, after_unit):
        calls.append(config_key(params))
        trial_plan = plan_cell(cell_config(cfg, params, ("ar", "lookahead"), root / "cells"))
        return measure_config(trial_plan, cell_model, units, after_unit)

    first = units[0]
    warm_up_arm(plan, cell_model, first, "ar")
    runs = [generate("ar", cell_model, list(first.prompt_ids), plan, first.seed) for _ in "abc"]
    tau = sorted(r.wall_time_s / r.new_tokens for r in runs)[1]
    profile = {**PROFILE, "forward_time_s": [t / 1e-3 * tau for t in PROFILE["forward_time_s"]]}
    return measure, calls, len(units), profile


def _study_with_best(path, best: float) -> optuna.Study:
    study = open_study(path, {"test": str(path)}, sampler_seed=0)
    values = {"ngram": 2, "window": 1, "guesses": 1, "prompt_as_reference": True, "verification": "flat"}
    assert LookaheadParams(**values) == SEEDED
    study.add_trial(create_trial(params=values, distributions=distributions(SPACE), value=best))
    return study


def _queue(study: optuna.Study, *configs: LookaheadParams) -> None:
    for p in configs:
        values = {"ngram": p.ngram, "window": p.window, "guesses": p.guesses}
        study.enqueue_trial({**values, "prompt_as_reference": True, "verification": "flat"})


def _settings(trials: int, profile) -> SearchSettings:
    return SearchSettings(SPACE, profile, trials, None, prune=True, seed=0, prune_after_units=1)


def test_configuration_whose_bound_is_below_the_best_is_pruned(tiny_measure, tmp_path):
    measure, calls, n_units, profile = tiny_measure
    calls.clear()
    study = _study_with_best(tmp_path, best=4.0)
    _queue(study, WIDE, CHEAP5)
    assert run_search(study, _settings(3, profile), measure) == "trials"
    fate = {e.key: e for e in evaluated(study)}
    # WIDE: prior bound 5 t(1) / t(32) = 1.25 <= 4, pruned without a single generation.
    wide = fate[config_key(WIDE)]
    assert wide.pruned and wide.trial.user_attrs["pruned_by"] == PRUNED_PRIOR
    assert wide.trial.user_attrs["prior_bound"] == pytest.approx(1.25)
    assert config_key(WIDE) not in calls
    # CHEAP5: prior bound 5 t(1) / t(8) = 5 > 4, so it is measured; its 8 new tokens take a prefill and
    # at least two steps of at most 5 tokens (compression <= 8/3) at t(k <= 8) = AR's time per token,
    # so its measured bound (about 8/3 or less) stops it after its first unit.
    cheap = fate[config_key(CHEAP5)]
    assert calls == [config_key(CHEAP5)]
    assert cheap.trial.user_attrs["prior_bound"] == pytest.approx(5.0)
    assert cheap.pruned and cheap.trial.user_attrs["pruned_by"] == PRUNED_MEASURED
    assert cheap.trial.user_attrs["probe"]["n_units"] == 1 < n_units
    assert cheap.trial.user_attrs["measured_bound"] < 4.0


@pytest.mark.parametrize("params", [CHEAP5, WIDE], ids=config_key)
def test_configuration_whose_bound_is_above_the_best_is_measured_in_full(tiny_measure, tmp_path, params):
    measure, calls, n_units, profile = tiny_measure
    calls.clear()
    # 0.001 is far below both bounds: the prior ones (5 and 1.25) and the measured ones (at least one
    # token per step at t(k) <= 7 AR tokens, so about 1/7 or more at every unit). Far below, because
    # the profile is calibrated to AR's speed when the fixture ran and the measured bound uses AR's
    # speed during the trial: on a machine whose load changes in between, those can differ severalfold.
    best = 1e-3
    study = _study_with_best(tmp_path, best=best)
    _queue(study, params)
    run_search(study, _settings(2, profile), measure)
    trial = {e.key: e for e in evaluated(study)}[config_key(params)].trial
    assert calls == [config_key(params)]
    assert trial.state == TrialState.COMPLETE and "pruned_by" not in trial.user_attrs
    assert trial.user_attrs["probe"]["n_units"] == n_units
    assert trial.value == pytest.approx(trial.user_attrs["probe"]["speedup"])
    assert trial.user_attrs["probe"]["mismatches"] == 0
    assert trial.user_attrs["measured_bound"] > best


def test_a_tune_folder_made_with_another_identity_is_refused(tmp_path):
    open_study(tmp_path, {"model": "a", "probe_sample_ids": ["1"]}, sampler_seed=0)
    with pytest.raises(TuneIdentityError, match="different probe_sample_ids"):
        open_study(tmp_path, {"model": "a", "probe_sample_ids": ["2"]}, sampler_seed=0)


def test_search_stops_when_the_space_is_exhausted_and_never_measures_a_configuration_twice(tiny_measure, tmp_path):
    measure, calls, _, profile = tiny_measure
    calls.clear()
    space = SearchSpace(ngram=(2,), window=(1,), guesses=(1, 2), prompt_as_reference=(True,), verification=("flat",))
    study = open_study(tmp_path, {"test": "exhaust"}, sampler_seed=0)
    settings = SearchSettings(space, profile, trials=5, timeout_s=None, prune=False, seed=0)
    assert run_search(study, settings, measure) == "space exhausted"
    assert sorted(calls) == sorted({config_key(p) for p in space.all_params()})
    assert len(evaluated(study)) == 2
    # TPE's repeated proposals, if any, were told the earlier result instead of being measured again.
    repeats = [t for t in study.get_trials() if "repeat_of" in t.user_attrs]
    assert all(t.value == study.trials[t.user_attrs["repeat_of"]].value for t in repeats)
