"""Every method tuned for the device: declared budgets, the step-cost search, the held-out check, the leaderboard.

One tiny tune of two rival methods runs through the real command line (a module fixture, the slow lane; each
run forked from the CLI server, tests/runner/cli_server.py, so the imports are paid once):
its device profile measured over widths and KV lengths by the tune, every candidate of each method's
declared budget run on the search samples, predicted by the step-cost model, the winners declared, then
AR with both methods at their defaults and at their tuned settings on held-out samples. The same command
run again reuses every row. Bad methods and budget values are refused before the model loads.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from lade_bench.methods import get_method, methods_where
from lade_bench.methods.budget import candidate_grid, candidate_key
from lade_bench.results import load_rows
from lade_bench.stats.step_cost import predicted_speedup
from lade_bench.tune.budget_search import paired_rows
from lade_bench.tune.config import TuneConfigError, tune_settings
from lade_bench.tune.methods_tune import prepare_methods

from ..runner.cli_server import CliServer
from .conftest import TINY_RUN, compose_tune, tmp_outputs

# The settings each method's budget must cover (the issue's list), read from the registry entries.
ISSUE_BUDGETS = {
    "prompt_lookup": {"num_tokens", "max_ngram_size"},
    "token_recycling": {"tree"},
    "sam_decoding": {"n_predicts", "tree"},
    "pia": {"decoding_length", "branch_length"},
    "suffix_decoding": {"max_tree_depth", "max_spec_factor"},
    "rest": {"num_draft"},
}
TUNED = ["prompt_lookup", "suffix_decoding"]
# A tiny tune: tiny llama in float64, 8 new tokens, MT-Bench (two turns), a short 2D profile.
TINY_METHODS_TUNE = [
    *TINY_RUN,
    "device_profile.kv_lengths=[8,512]",
    "tune.probe_samples=2",
    "tune.heldout_samples=2",
    f"tune.methods=[{','.join(TUNED)}]",
    "tune.name=m",
]


def test_every_method_declares_the_budget_the_issue_names_with_its_defaults_among_the_candidates():
    assert set(methods_where(lambda m: m.budget is not None)) == set(ISSUE_BUDGETS)
    for name, settings in ISSUE_BUDGETS.items():
        method = get_method(name)
        assert set(method.budget.values) == settings, name
        defaults = method.config()
        grid = candidate_grid(method.budget.values)
        assert 2 <= len(grid) <= 12, name
        assert any(all(getattr(defaults, k) == v for k, v in c.items()) for c in grid), f"{name}: defaults missing"


def _cli(cli_server: CliServer, root: Path, overrides: list[str]) -> subprocess.CompletedProcess:
    """``python -m lade_bench.tune`` in ``root``, forked from the CLI server (its imports paid once)."""
    args = [*TINY_METHODS_TUNE, *tmp_outputs(root), *overrides]
    return cli_server.run(args, cwd=root, module="lade_bench.tune", timeout=600)


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("tune.methods=[prompt_lookup,nope]", "'nope' is not a decoding method"),
        ("tune.methods=[lookahead,pia]", "lookahead is tuned on its own"),
        ("+tune.budgets.prompt_lookup.bogus=[1]", "use any of ['num_tokens', 'max_ngram_size']"),
        ("+tune.budgets.prompt_lookup.num_tokens=[0,2]", "prompt_lookup.num_tokens=0 is not allowed"),
        ("+tune.budgets.pia.decoding_length=[8]", "'pia' is not among the tuned methods"),
    ],
)
def test_bad_method_or_budget_is_refused_before_the_model_loads(tmp_path, override, named):
    cfg = compose_tune([*TINY_METHODS_TUNE, *tmp_outputs(tmp_path), override])
    with pytest.raises(TuneConfigError) as caught:
        prepare_methods(cfg, tune_settings(cfg))
    assert named in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "tunes").exists()  # nothing written


def test_the_command_line_refuses_a_bad_budget_in_one_line_without_loading_the_model(tmp_path, cli_server):
    done = _cli(cli_server, tmp_path, ["+tune.budgets.suffix_decoding.max_spec_factor=[-1]"])
    assert done.returncode != 0
    printed = done.stdout + done.stderr
    errors = [line for line in printed.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "suffix_decoding.max_spec_factor=-1 is not allowed" in errors[0], printed
    assert "loading model" not in printed


@pytest.fixture(scope="module")
def tune(tmp_path_factory, cli_server):
    """The tiny tune through the command line: the search alone (tune.search_only), the same command without
    it (the held-out check), once more (everything reused), then another tune reusing the search
    (tune.search_from)."""
    root = tmp_path_factory.mktemp("methods_tune")
    searched = _cli(cli_server, root, ["tune.search_only=true"])
    assert searched.returncode == 0, (searched.stdout + searched.stderr)[-4000:]
    tune_dir = root / "tunes" / "m"
    search_only = {
        "search": json.loads((tune_dir / "methods_search.json").read_text()),
        "heldout_ran": (tune_dir / "heldout").exists() or (tune_dir / "methods_record.json").exists(),
    }
    first = _cli(cli_server, root, [])
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    record = json.loads((tune_dir / "methods_record.json").read_text())
    rows_before = {p: len(load_rows(p.parent)) for p in tune_dir.glob("*/*/rows.jsonl")}
    second = _cli(cli_server, root, [])
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    rows_after = {p: len(load_rows(p.parent)) for p in tune_dir.glob("*/*/rows.jsonl")}
    again = json.loads((tune_dir / "methods_record.json").read_text())
    reused = _cli(cli_server, root, ["tune.name=m2", f"tune.search_from={tune_dir}"])
    assert reused.returncode == 0, (reused.stdout + reused.stderr)[-4000:]
    reused_dir = root / "tunes" / "m2"
    search_only["reused"] = json.loads((reused_dir / "methods_record.json").read_text())
    search_only["reused_searched"] = (reused_dir / "search").exists()
    return {"dir": tune_dir, "first": first, "record": record, "again": again, "before": rows_before} | {
        "after": rows_after,
        **search_only,
    }


@pytest.mark.slow
def test_every_candidate_is_searched_and_predicted_by_the_step_cost_model_on_a_2d_profile_the_tune_measured(tune):
    record = tune["record"]
    assert "measured over" in record["profile_origin"]
    assert len(record["profile"]["kv_lengths"]) >= 2  # widths x KV lengths
    search_dir = tune["dir"] / "search"
    for name in TUNED:
        searched = record["candidates"][name]
        declared = [candidate_key(c) for c in candidate_grid(get_method(name).budget.values)]
        assert sorted(c["key"] for c in searched) == sorted(declared)
        for candidate in searched:
            rows = load_rows(search_dir / candidate["cell"])
            arm, ar = paired_rows(rows, name, record["search_sample_ids"])
            assert len(arm) == candidate["units"] > 0
            assert candidate["predicted_speedup"] == pytest.approx(predicted_speedup(arm, ar, record["profile"]))
            assert candidate["outputs_equal_ar"] == candidate["units"]  # exact: every output AR's
    # Round i's cell runs AR and the methods that have an i-th candidate, nothing else.
    for cell in search_dir.iterdir():
        expected = {c["method"] for n in TUNED for c in record["candidates"][n] if c["cell"] == cell.name}
        assert set(load_rows(cell)["arm"]) == {"ar", *expected}


@pytest.mark.slow
def test_the_declared_winner_is_the_top_prediction_and_runs_held_out_beside_the_defaults(tune):
    record = tune["record"]
    assert not set(record["search_sample_ids"]) & set(record["heldout"]["sample_ids"])
    heldout_dir = tune["dir"] / "heldout"
    for name in TUNED:
        predictions = [c["predicted_speedup"] for c in record["candidates"][name]]
        winner = record["winners"][name]
        assert winner["predicted_speedup"] == max(predictions) and winner["rank"] == 1
        per = record["heldout"]["methods"][name]
        assert per["tuned"]["settings"] == winner["settings"]
        assert per["defaults"]["settings"] == {k: getattr(get_method(name).config(), k) for k in winner["settings"]}
        for which in ("defaults", "tuned"):
            rows = load_rows(heldout_dir / record["heldout"]["cells"][which])
            section = pd.Series(rows["sample_id"].astype(str).unique())
            assert set(section) == set(map(str, record["heldout"]["sample_ids"]))
            assert per[which]["n_units"] == len(record["heldout"]["sample_ids"])
            assert per[which]["speedup"] > 0 and per[which]["predicted_speedup"] > 0


@pytest.mark.slow
def test_the_leaderboard_shows_defaults_and_tuned_with_n_and_the_command_says_where_outputs_went(tune):
    table = pd.read_csv(tune["dir"] / "leaderboard.csv")
    assert list(table["Method"]) == [get_method(n).label for n in TUNED]
    for column in ("Defaults: measured vs AR", "Tuned: measured vs AR"):
        assert table[column].str.contains(r"\(n=2").all()
    assert (tune["dir"] / "leaderboard.md").read_text().count("| Prompt lookup |") == 1
    printed = tune["first"].stdout + tune["first"].stderr
    for where in ("methods_search.json", "leaderboard.md", "python -m lade_bench.run prompt_lookup.num_tokens="):
        assert where in printed


@pytest.mark.slow
def test_the_same_command_again_reuses_every_search_and_held_out_row_and_the_declared_winners(tune):
    assert tune["before"] and tune["before"] == tune["after"]
    assert tune["again"]["winners"] == tune["record"]["winners"]
    assert tune["again"]["declared_utc"] == tune["record"]["declared_utc"]  # declared once, never again


@pytest.mark.slow
def test_search_only_stops_before_the_held_out_check_and_search_from_reuses_the_declared_winners(tune):
    assert not tune["heldout_ran"]
    assert tune["search"]["winners"] == tune["record"]["winners"]  # the held-out run resumed the declared search
    reused = tune["reused"]
    assert not tune["reused_searched"]  # no search cell ran in the tune that reused the search
    assert reused["winners"] == tune["record"]["winners"] and reused["search_from"].endswith("m")
    assert set(reused["heldout"]["methods"]) == set(TUNED)
