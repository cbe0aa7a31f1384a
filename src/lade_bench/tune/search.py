"""The search: Optuna's TPE sampler over the lookahead settings, persisted in SQLite, with bound pruning.

One Optuna trial measures one configuration (:mod:`lade_bench.tune.probe`); its value is the measured
speedup over AR on the probe units. The study lives in ``<tune folder>/study.db``, so a tune that is
killed resumes where it stopped: finished trials are read back, never measured again, and a trial the
kill interrupted (left RUNNING in the database) is marked failed and its configuration queued first.

Pruning (``tune.prune``, :mod:`lade_bench.tune.bound`): before measuring, a configuration whose
prior bound cannot beat the best measured speedup is told PRUNED unmeasured; while measuring, the
bound from the acceptance measured so far is reported after every unit and the trial stops (PRUNED)
once it falls to or below the best. Pruned trials count as evaluated configurations.

TPE may propose a configuration it has already seen (the space is small and categorical); such a
proposal is told the earlier result, as Optuna's FAQ recommends, and is not counted or measured
again. After many repeats in a row an unseen configuration is queued so the search keeps moving.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from lade_bench.decoding import LookaheadParams
from lade_bench.tune.bound import measured_bound, prior_bound, should_prune
from lade_bench.tune.config import SearchSpace
from lade_bench.tune.probe import ProbeMeasurement

log = logging.getLogger(__name__)

STUDY_DB = "study.db"
STUDY_NAME = "lade_bench_tune"
# The tune's identity (model, data, probe ids, space ...) is stored in the study; a folder made with
# another identity is refused rather than mixed.
IDENTITY_ATTR = "tune_identity"
# Proposals of already-seen configurations in a row before an unseen one is queued.
_MAX_REPEATS = 20

PRUNED_PRIOR = "prior bound"
PRUNED_MEASURED = "measured bound"


class TuneIdentityError(ValueError):
    """The tune folder holds a study made with a different model, dataset, space or probe set."""


def config_key(params: LookaheadParams) -> str:
    """A readable, unique name of a configuration, e.g. ``N4W3G3ref-trie``."""
    ref = "ref" if params.prompt_as_reference else "noref"
    return f"N{params.ngram}W{params.window}G{params.guesses}{ref}-{params.verification}"


def params_of(values: Mapping[str, Any]) -> LookaheadParams:
    """The lookahead params of an Optuna trial's ``params``."""
    return LookaheadParams(
        ngram=int(values["ngram"]),
        window=int(values["window"]),
        guesses=int(values["guesses"]),
        prompt_as_reference=bool(values["prompt_as_reference"]),
        verification=str(values["verification"]),
    )


def distributions(space: SearchSpace) -> dict[str, BaseDistribution]:
    """Optuna's distributions of the space: categorical over the listed values of each setting."""
    return {name: CategoricalDistribution(list(values)) for name, values in space.choices().items()}


def open_study(tune_dir: Path, identity: Mapping[str, Any], sampler_seed: int) -> optuna.Study:
    """Create or reopen the tune's study in ``<tune_dir>/study.db``.

    Raises:
        TuneIdentityError: the folder's study was made with another identity.
    """
    tune_dir.mkdir(parents=True, exist_ok=True)
    storage = optuna.storages.RDBStorage(f"sqlite:///{tune_dir / STUDY_DB}")
    sampler = optuna.samplers.TPESampler(seed=sampler_seed, n_startup_trials=5)
    study = optuna.create_study(
        storage=storage, study_name=STUDY_NAME, direction="maximize", sampler=sampler, load_if_exists=True
    )
    stored = study.user_attrs.get(IDENTITY_ATTR)
    if stored is None:
        study.set_user_attr(IDENTITY_ATTR, dict(identity))
    elif stored != dict(identity):
        changed = sorted(k for k in set(stored) | set(identity) if stored.get(k) != identity.get(k))
        raise TuneIdentityError(
            f"{tune_dir} holds a tune made with a different {', '.join(changed)}; choose another tune.name "
            "(or delete that folder to start over)"
        )
    return study


def recover_interrupted(study: optuna.Study) -> list[str]:
    """Mark trials a kill left RUNNING as failed and queue their configurations again, first.

    Only called while this process holds the tune's lock, so a RUNNING trial has no live owner.
    Returns the configuration keys queued again.
    """
    queued = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        # Optuna has no public call that fails another process's trial; the storage's own is what
        # its heartbeat mechanism uses for the same purpose.
        study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
        study.enqueue_trial(dict(trial.params), user_attrs={"retry_of": trial.number})
        queued.append(config_key(params_of(trial.params)))
    return queued


@dataclass(frozen=True)
class Evaluated:
    """One evaluated configuration as the search saw it (a finished, non-repeat trial)."""

    trial: FrozenTrial

    @property
    def params(self) -> LookaheadParams:
        """The configuration."""
        return params_of(self.trial.params)

    @property
    def key(self) -> str:
        """:func:`config_key` of the configuration."""
        return config_key(self.params)

    @property
    def pruned(self) -> bool:
        """True when the bound stopped it (before or during measurement)."""
        return self.trial.state == TrialState.PRUNED

    @property
    def speedup(self) -> float:
        """Measured probe speedup (NaN when pruned)."""
        if self.trial.state != TrialState.COMPLETE:
            return math.nan
        value = self.trial.value
        assert value is not None  # a complete single-objective trial has its value
        return float(value)


def evaluated(study: optuna.Study) -> list[Evaluated]:
    """Evaluated configurations in trial order: finished trials that were not repeats of another."""
    states = (TrialState.COMPLETE, TrialState.PRUNED)
    return [Evaluated(t) for t in study.get_trials(deepcopy=False, states=states) if "repeat_of" not in t.user_attrs]


def ar_token_time(study: optuna.Study) -> float | None:
    """AR's wall time per token over every probe measurement so far (None before the first).

    Every trial runs AR on the same probe units, so this pools the same measurement repeated; it is
    the ``tau`` of the prior bound (``lade_bench.tune.bound``).
    """
    times, tokens = 0.0, 0
    for e in evaluated(study):
        probe = e.trial.user_attrs.get("probe") or {}
        times += sum(probe.get("ar_time_s", []))
        tokens += sum(probe.get("ar_tokens", []))
    return times / tokens if tokens else None


def search_rank(speedup: float, trial: int) -> tuple[float, int]:
    """Sort key of the search's ranking: the higher probe speedup first, the earlier trial on a tie.

    The top-k the held-out validation runs (and ``search_rank_1``'s winner) is this order over the
    measured configurations, whether read from a live study or from an earlier tune's record.
    """
    return (-speedup, trial)


def best_speedup(study: optuna.Study) -> float | None:
    """Best measured probe speedup so far (None before the first measured configuration)."""
    values = [e.speedup for e in evaluated(study) if not e.pruned]
    return max(values) if values else None


Measure = Callable[[LookaheadParams, Callable[[ProbeMeasurement], None]], ProbeMeasurement]


@dataclass
class SearchSettings:
    """What :func:`run_search` needs besides the study and the measuring function."""

    space: SearchSpace
    profile: Mapping[str, Any]
    trials: int
    timeout_s: float | None
    prune: bool
    seed: int
    prune_after_units: int = 1


def run_search(
    study: optuna.Study,
    settings: SearchSettings,
    measure: Measure,
    on_trial: Callable[[optuna.Study], None] = lambda _: None,
) -> str:
    """Evaluate configurations until ``settings.trials`` are evaluated, the space is exhausted or time is up.

    Args:
        study: the tune's study (resumed or new).
        settings: space, profile, budget and pruning.
        measure: measures a configuration on the probe units, calling its second argument after
            every unit (which may raise ``optuna.TrialPruned``).
        on_trial: called after every evaluated configuration (progress, the JSON record).

    Returns:
        Why the search stopped: ``"trials"``, ``"space exhausted"`` or ``"timeout"``.
    """
    rng = random.Random(settings.seed)
    dists = distributions(settings.space)
    started = time.monotonic()
    repeats_in_a_row = 0
    while True:
        done = {e.key: e for e in evaluated(study)}
        if len(done) >= settings.trials:
            return "trials"
        if len(done) >= settings.space.size():
            return "space exhausted"
        if settings.timeout_s is not None and time.monotonic() - started >= settings.timeout_s:
            return "timeout"
        trial = study.ask(dists)
        params = params_of(trial.params)
        key = config_key(params)
        if key in done:
            _tell_repeat(study, trial, done[key])
            repeats_in_a_row += 1
            if repeats_in_a_row >= _MAX_REPEATS:
                unseen = [p for p in settings.space.all_params() if config_key(p) not in done]
                study.enqueue_trial(_as_values(rng.choice(unseen)))
                repeats_in_a_row = 0
            continue
        repeats_in_a_row = 0
        _evaluate(study, trial, params, settings, measure)
        on_trial(study)


def _evaluate(
    study: optuna.Study, trial: optuna.Trial, params: LookaheadParams, settings: SearchSettings, measure: Measure
) -> None:
    best = best_speedup(study)
    tau = ar_token_time(study)
    bound = prior_bound(params, settings.profile, tau)
    trial.set_user_attr("config", config_key(params))
    trial.set_user_attr("prior_bound", bound)
    trial.set_user_attr("ar_time_per_token_before", tau)
    trial.set_user_attr("best_before", best)
    if settings.prune and should_prune(bound, best):
        trial.set_user_attr("pruned_by", PRUNED_PRIOR)
        log.info("%s pruned unmeasured: bound %.3f <= best %.3f", config_key(params), bound, best)
        study.tell(trial, state=TrialState.PRUNED)
        return

    def after_unit(measurement: ProbeMeasurement) -> None:
        bound_now = measured_bound(
            sum(measurement.la_tokens),
            measurement.steps,
            measurement.decode_step_tokens,
            measurement.decode_steps,
            settings.profile,
            measurement.ar_time_per_token(),
        )
        trial.report(bound_now, measurement.n_units)
        trial.set_user_attr("measured_bound", bound_now)
        trial.set_user_attr("probe", measurement.as_record())
        enough = measurement.n_units >= settings.prune_after_units
        if settings.prune and enough and should_prune(bound_now, best):
            trial.set_user_attr("pruned_by", PRUNED_MEASURED)
            raise optuna.TrialPruned(f"bound {bound_now:.3f} <= best {best:.3f} after {measurement.n_units} unit(s)")

    try:
        measurement = measure(params, after_unit)
    except optuna.TrialPruned as why:
        log.info("%s pruned: %s", config_key(params), why)
        study.tell(trial, state=TrialState.PRUNED)
        return
    trial.set_user_attr("probe", measurement.as_record())
    study.tell(trial, measurement.speedup())


def _tell_repeat(study: optuna.Study, trial: optuna.Trial, earlier: Evaluated) -> None:
    trial.set_user_attr("repeat_of", earlier.trial.number)
    if earlier.pruned:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, earlier.speedup)


def _as_values(params: LookaheadParams) -> dict[str, Any]:
    return {
        "ngram": params.ngram,
        "window": params.window,
        "guesses": params.guesses,
        "prompt_as_reference": params.prompt_as_reference,
        "verification": params.verification,
    }
