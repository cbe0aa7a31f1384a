"""The step-cost check (``report.step_cost_check``), its command and the report's device-profile figure, on the
small real sweep of ``conftest.py`` (the real engine's rows and the profile measured beside them)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from matplotlib.collections import PathCollection

from lade_bench import stats
from lade_bench.methods import method_label
from lade_bench.profiling.device_profile import StoredProfile
from lade_bench.report.figures import FIGURES
from lade_bench.report.step_cost_check import MATCH_GIVEN, MATCH_GIVEN_NO_CPU, check_sweep, unpriced_reason
from lade_bench.report.step_cost_cli import CHECK_CSV, CHECK_MD, main
from lade_bench.report.sweep import sweep_from_rows
from lade_bench.stats.step_cost import predicted_speedup

# Lowered so that the test cells' 2-3 samples get intervals, and so verdicts and "inside the interval".
WITH_CI = stats.IntervalSettings(n_boot=200, min_units=2)


@pytest.fixture(scope="module")
def with_ci(sweep):
    return sweep_from_rows(sweep.rows, roots=sweep.roots, cells=sweep.cells, profiles=sweep.profiles, intervals=WITH_CI)


@pytest.fixture(scope="module")
def check(with_ci):
    return check_sweep(with_ci)


def test_every_arm_of_every_cell_is_checked_against_its_own_measurement(with_ci, check):
    others = with_ci.summary[with_ci.summary["arm"] != stats.BASELINE_ARM]
    assert list(zip(check["cell_id"], check["arm"], strict=True)) == list(
        zip(others["cell_id"], others["arm"], strict=True)
    )
    assert (check["not_predicted"] == "").all()
    for rec, measured in zip(check.to_dict("records"), others.to_dict("records"), strict=True):
        assert rec["measured"] == measured["speedup"]
        assert (rec["ci_low"], rec["ci_high"]) == (measured["speedup_ci_low"], measured["speedup_ci_high"])
        assert rec["measured_verdict"] == stats.speedup_verdict(rec["ci_low"], rec["ci_high"])
        assert rec["error"] == pytest.approx(rec["predicted"] / rec["measured"] - 1)
        assert rec["inside_interval"] == str(rec["ci_low"] <= rec["predicted"] <= rec["ci_high"])


def test_the_prediction_is_the_step_cost_model_on_the_cells_paired_rows(with_ci, check):
    (stored,) = with_ci.profiles
    for rec in check.to_dict("records"):
        cell = stats.common_rows(with_ci.rows[with_ci.rows["cell_id"] == rec["cell_id"]])
        arm = cell[cell["arm"] == rec["arm"]].sort_values(list(stats.PAIR_KEY))
        ar = cell[cell["arm"] == stats.BASELINE_ARM].sort_values(list(stats.PAIR_KEY))
        expected = predicted_speedup(arm, ar, stored.profile)
        if rec["sampling"]:  # measured per generated token, so predicted per token too
            expected *= arm["new_tokens"].sum() / ar["new_tokens"].sum()
        assert rec["predicted"] == pytest.approx(expected, rel=1e-12)
        assert rec["predicted_verdict"] == ("faster" if expected > 1 else "slower")
        # The rows recorded every forward's time: nothing is taken as zero on the arm's side.
        assert rec["arm_rows_without_outside_time"] == 0 and rec["kv_measured"] in ("True", "False")
        assert rec["error"] == pytest.approx(rec["ar_time_ratio"] / rec["arm_time_ratio"] - 1)
    assert check["sampling"].any() and not check["sampling"].all()


def test_arms_the_model_cannot_describe_are_listed_with_the_reason(sweep):
    rows = sweep.rows.copy()
    lookup = rows.index[rows["arm"] == "prompt_lookup"]
    first_cell = rows.loc[lookup, "cell_id"].iloc[0]
    rows.loc[lookup[rows.loc[lookup, "cell_id"] == first_cell], "arm"] = "assisted"
    stepless = lookup[rows.loc[lookup, "cell_id"] != first_cell]
    rows["step_tokens"] = rows["step_tokens"].astype(object)
    for i in stepless:
        rows.at[i, "step_tokens"] = None
    changed = check_sweep(sweep_from_rows(rows, roots=sweep.roots, cells=sweep.cells, profiles=sweep.profiles))
    reasons = dict(zip(zip(changed["cell_id"], changed["arm"], strict=True), changed["not_predicted"], strict=True))
    assert (
        reasons[(first_cell, "assisted")] == unpriced_reason("assisted")
        and "draft" in reasons[(first_cell, "assisted")]
    )
    others = {c for c in rows.loc[stepless, "cell_id"]}
    assert others and all("without step_tokens" in reasons[(c, "prompt_lookup")] for c in others)
    assert all(reasons[(c, "lookahead")] == "" for c in set(changed["cell_id"]) if (c, "lookahead") in reasons)
    listed = changed[changed["not_predicted"] != ""]
    assert listed["predicted"].isna().all() and listed["measured"].notna().all()

    unprofiled = check_sweep(sweep_from_rows(sweep.rows, roots=sweep.roots, cells=sweep.cells, profiles=None))
    assert len(unprofiled) == len(changed)
    assert unprofiled["not_predicted"].str.startswith("no committed device profile of the cell's key").all()


def test_a_given_profile_serves_only_cells_of_its_model_dtype_mode_threads_and_cpu(sweep):
    bare = sweep_from_rows(sweep.rows, roots=sweep.roots, cells=sweep.cells, profiles=None)
    (stored,) = sweep.profiles
    assert stored.profile.get("processor")
    matched = check_sweep(bare, [stored])
    assert (matched["not_predicted"] == "").all() and (matched["profile_match"] == MATCH_GIVEN).all()
    own = check_sweep(sweep)
    assert matched["predicted"].tolist() == pytest.approx(own["predicted"].tolist(), rel=1e-12)

    def altered(**changes) -> StoredProfile:
        profile = {k: v for k, v in {**stored.profile, **changes}.items() if v is not None}
        return StoredProfile(profile, stored.path, None)

    unrecorded = check_sweep(bare, [altered(processor=None)])
    assert (unrecorded["profile_match"] == MATCH_GIVEN_NO_CPU).all() and (unrecorded["not_predicted"] == "").all()
    for other in (
        {"processor": "another CPU"},
        {"dtype": "bfloat16"},
        {"compile_mode": "default"},
        {"device_kind": "cpu x86_64 (64 threads)"},
        {"model": "another-model"},
    ):
        refused = check_sweep(bare, [altered(**other)])
        assert refused["not_predicted"].str.startswith("no committed device profile").all(), other


def test_verdicts_read_the_interval_against_one():
    assert stats.speedup_verdict(1.01, 1.3) == "faster"
    assert stats.speedup_verdict(0.7, 0.99) == "slower"
    assert stats.speedup_verdict(0.9, 1.1) == "cannot tell"
    assert stats.speedup_verdict(math.nan, math.nan) == "cannot tell"


def test_the_device_profile_figure_draws_every_method_from_the_step_cost_model(with_ci, check):
    """One marker per method with its count (not one identical label per cell), every predicted arm drawn at
    (measured, predicted), the diagonal and n on it."""
    fig = FIGURES["device_profile"].draw(with_ci)
    _, panel = fig.axes
    labels = [t.get_text() for t in panel.get_legend().get_texts()]
    counts = check["arm"].value_counts()
    expected = [f"{method_label(arm)} (n={counts[arm]})" for arm in stats.sorted_arms(check["arm"].unique())]
    assert labels == [*expected, "predicted = measured"]
    assert len(set(labels)) == len(labels)
    drawn = pd.concat(
        [
            pd.DataFrame(c.get_offsets(), columns=["measured", "predicted"])
            for c in panel.collections
            if isinstance(c, PathCollection)
        ]
    )
    assert sorted(map(tuple, drawn.round(9).to_numpy())) == sorted(
        map(tuple, check[["measured", "predicted"]].round(9).to_numpy())
    )
    assert "n=" in fig._suptitle.get_text()


def test_the_command_writes_the_check_and_refuses_a_missing_profile_first(sweep, sweep_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--out", str(out), f"{sweep_dir}={tmp_path / 'nowhere.json'}"]) == 2
    error = capsys.readouterr().err.strip()
    assert "nowhere.json" in error and "does not exist" in error and len(error.splitlines()) == 1
    assert not out.exists()

    assert main(["--out", str(out), "--n-boot", "50", str(sweep_dir)]) == 0
    written = pd.read_csv(out / CHECK_CSV, keep_default_na=False, na_values=[""])
    assert len(written) == int((sweep.summary["arm"] != stats.BASELINE_ARM).sum())
    page = (out / CHECK_MD).read_text()
    assert f"predicted: {len(written)} of {len(written)} arms" in page
    assert (out / "predicted_vs_measured.png").is_file() and (out / "predicted_vs_measured.pdf").is_file()
