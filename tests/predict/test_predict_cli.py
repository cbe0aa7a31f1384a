"""``python -m lade_bench.predict`` from the command line, on the committed rows and profiles.

The committed main sweep holds SmolLM2 cells timed on two CPU kinds (AMD EPYC 26/2/1 and Intel Xeon
6/167/8, each with its own profile): the AMD cells predicted from the Intel profile must be
``stats.step_cost``'s numbers on those rows with that profile, headed with the profile they came from.
Every refusal is one line, exit status 2, before anything is written.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lade_bench import stats
from lade_bench.predict.__main__ import main as predict_main
from lade_bench.report.conditions import cell_processor
from lade_bench.results import load_rows
from lade_bench.results.archive import read_archive_cells
from lade_bench.stats.step_cost import predicted_speedup

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "paper_figures" / "rows"
MAIN = ROWS / "main"
PROFILES = MAIN / "device_profiles"
INTEL_SMOLLM2 = PROFILES / "cpu-x86-64-1-threads--smollm2-135m-instruct--float32--sdpa--cpu-17f8311b488c.json"
AMD_GEMMA = PROFILES / "cpu-x86-64-1-threads--gemma3-270m--float32--sdpa--cpu-04ce6b5dd321.json"
# The engine benchmark's step-cost file: four SmolLM2 curves (float32 / bfloat16, eager / compiled), 1..64 tokens.
BENCH_CURVES = REPO / "paper_figures" / "baselines" / "step_cost" / "step-cost-20261203-090222.json"


def predict(*args: str | Path) -> subprocess.CompletedProcess:
    """``python -m lade_bench.predict ARGS`` as a user runs it."""
    command = [sys.executable, "-m", "lade_bench.predict", *(str(a) for a in args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)


@pytest.fixture(scope="module")
def main_from_intel(tmp_path_factory):
    """The main sweep predicted with the Intel SmolLM2 profile (and the Gemma cells' own profile)."""
    out = tmp_path_factory.mktemp("predicted")
    done = predict(MAIN, "--profile", INTEL_SMOLLM2, AMD_GEMMA, "--out", out, "--n-boot", "50")
    assert done.returncode == 0, done.stderr[-3000:]
    return done, out


def test_amd_cells_predicted_from_the_intel_profile_are_the_step_cost_model_on_their_rows(main_from_intel):
    done, out = main_from_intel
    assert f"wrote {(out / 'leaderboard.md').resolve()}" in done.stdout
    table = pd.read_csv(out / "leaderboard.csv", dtype={"cell_id": str})
    rows = load_rows(MAIN)
    processors = {c["cell_id"]: cell_processor(json.loads(c["manifest_text"])) for c in read_archive_cells(MAIN)}
    amd = sorted(cell for cell, label in processors.items() if "AuthenticAMD 26/2/1" in label)
    assert len(amd) == 8  # the SmolLM2 cells of the AMD kind
    profile = json.loads(INTEL_SMOLLM2.read_text())
    checked = 0
    for cell_id in amd:
        paired = stats.common_rows(rows[rows["cell_id"] == cell_id])
        ar = paired[paired["arm"] == "ar"].sort_values(list(stats.PAIR_KEY))
        for arm in sorted(set(paired["arm"]) - {"ar"}):
            mine = paired[paired["arm"] == arm].sort_values(list(stats.PAIR_KEY))
            (rec,) = table[(table["cell_id"] == cell_id) & (table["arm"] == arm)].to_dict("records")
            assert rec["predicted_speedup"] == pytest.approx(predicted_speedup(mine, ar, profile), rel=1e-9)
            # Beside it, what the AMD machine measured: the ratio of the rows' summed wall times.
            measured = ar["wall_time_s"].sum() / mine["wall_time_s"].sum()
            assert rec["measured_speedup"] == pytest.approx(measured, rel=1e-9)
            assert "AMD EPYC 26/2/1" in rec["measured_on"] and rec["n_units"] == mine["sample_id"].nunique()
            assert (rec["profile"], rec["profile_model"], rec["profile_dtype"]) == (
                str(INTEL_SMOLLM2),
                "smollm2-135m-instruct",
                "float32",
            )
            assert "GenuineIntel 6/167/8" in rec["profile_processor"] and not rec["kv_measured"]
            checked += 1
    assert checked >= 8
    # The assisted arm's rows run a draft model beside the target: no one-model profile prices them.
    assisted = table[table["arm"] == "assisted"].to_dict("records")
    assert assisted and all(math.isnan(rec["predicted_speedup"]) for rec in assisted)
    assert {rec["predicted_ci_note"] for rec in assisted} == {
        "not predicted: its steps run replica + draft, and a profile times one model on one device"
    }
    heading = (
        f"## predicted for cpu x86_64 (1 threads) from {INTEL_SMOLLM2} "
        "(smollm2-135m-instruct, float32, 1 threads, Intel Xeon 6/167/8), not measured"
    )
    markdown = (out / "leaderboard.md").read_text()
    assert heading in markdown
    assert "every step read at the profile's one context (128 tokens)" in markdown


# The refusals the issue names (another model's or dtype's profile), run from the command line.
SUBPROCESS_CASES = ("gemma profile for smollm2 rows", "bfloat16 profile for float32 rows")


def _bench_curve(tmp_path: Path, dtype: str) -> Path:
    """One eager curve of the engine benchmark's step-cost file, as the profile file it was measured as."""
    curves = json.loads(BENCH_CURVES.read_text())["curves"]
    (curve,) = [c for c in curves if c["dtype"] == dtype and c["compile_mode"] == "eager"]
    path = tmp_path / f"smollm2-{dtype}.json"
    path.write_text(json.dumps(curve))
    return path


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "gemma profile for smollm2 rows",
            f"error: profile {AMD_GEMMA} is for model gemma3-270m float32, "
            "rows are model smollm2-135m-instruct float32",
        ),
        (
            "bfloat16 profile for float32 rows",
            "error: profile {bf16} is for model /root/.cache/lade_bench/smollm2-135m-instruct bfloat16, rows are "
            "model smollm2-135m-instruct float32; pass a profile measured in that dtype",
        ),
        (
            "no gemma profile for a two-model sweep",
            "error: the rows hold 2 models (gemma3-270m, smollm2-135m-instruct) and need a --profile per model; "
            "none given for gemma3-270m",
        ),
        (
            "a step wider than the profile measured",
            "arm lookahead: the device profile covers 1..64 tokens per forward pass, not 80",
        ),
        ("not a profile", f"error: {BENCH_CURVES} is not a device profile measured by the suite (it lacks"),
        ("no rows", "error: no rows in {empty}: pass a sweep folder"),
    ],
)
def test_refusals_are_one_line_before_anything_is_written(tmp_path, capsys, case, expected):
    """Each refusal: exit status 2, one line on stderr, nothing written. The model and dtype refusals run the
    command as a user does; the others call its ``main`` in this process (the same code, without starting
    an interpreter and importing the report for each)."""
    bf16, fp32, empty = _bench_curve(tmp_path, "bfloat16"), _bench_curve(tmp_path, "float32"), tmp_path / "empty"
    empty.mkdir()
    spec_bench = REPO / "paper_figures" / "spec_bench" / "rows" / "spec_bench"
    spec_gemma = next((spec_bench / "device_profiles").glob("*--gemma3-270m--*.json"))
    argv = {
        "gemma profile for smollm2 rows": [ROWS / "ablation_n", "--profile", AMD_GEMMA],
        "bfloat16 profile for float32 rows": [ROWS / "ablation_n", "--profile", bf16],
        "no gemma profile for a two-model sweep": [MAIN, "--profile", INTEL_SMOLLM2],
        # The Spec-Bench lookahead cells feed 80-token steps; the benchmark's curve stops at 64.
        "a step wider than the profile measured": [spec_bench, "--profile", fp32, spec_gemma],
        "not a profile": [MAIN, "--profile", BENCH_CURVES],
        "no rows": [empty, "--profile", AMD_GEMMA],
    }[case]
    out = tmp_path / "out"
    if case in SUBPROCESS_CASES:
        done = predict(*argv, "--out", out)
        status, stdout, stderr = done.returncode, done.stdout, done.stderr
    else:
        status = predict_main([str(a) for a in [*argv, "--out", out]])
        stdout, stderr = capsys.readouterr()
    assert status == 2 and stdout == ""
    (line,) = stderr.splitlines()
    assert expected.format(bf16=bf16, empty=empty) in line
    if case == "a step wider than the profile measured":
        assert line.startswith("error: cell spec_bench/") and ", arm " in line
    assert not out.exists()


def test_an_output_that_ended_at_the_prefill_leaves_its_sample_out_of_the_prediction(tmp_path):
    """A committed Spec-Bench cell (Gemma, AR and REST, 10 questions) in which one question's output is the
    prefill's token alone: AR's row has no decode step to price, so that sample leaves the predicted speedup
    (the step-cost model on the other nine), while the measured one keeps all ten."""
    source = REPO / "paper_figures" / "spec_bench" / "rows" / "spec_bench"
    cell_id, empty_sample = "eec6f94e35db1954", "summarization-243"
    archive = tmp_path / "one_cell"
    archive.mkdir()
    table = pq.read_table(source / "rows.parquet")
    pq.write_table(table.filter(pc.equal(table["cell_id"], cell_id)), archive / "rows.parquet")
    cells = [c for c in read_archive_cells(source) if c["cell_id"] == cell_id]
    (archive / "cells.json").write_text(json.dumps(cells))
    (profile,) = (source / "device_profiles").glob("*--gemma3-270m--*.json")
    done = predict(archive, "--profile", profile, "--out", tmp_path / "out", "--n-boot", "50")
    assert done.returncode == 0, done.stderr[-3000:]
    (rec,) = pd.read_csv(tmp_path / "out" / "leaderboard.csv").query("arm == 'rest'").to_dict("records")
    rows = stats.common_rows(load_rows(archive))
    kept = rows[rows["sample_id"] != empty_sample].sort_values(list(stats.PAIR_KEY))
    curve = json.loads(profile.read_text())
    expected = predicted_speedup(kept[kept["arm"] == "rest"], kept[kept["arm"] == "ar"], curve)
    assert (rec["n_units"], rec["predicted_n_units"]) == (10, 9)
    assert rec["predicted_speedup"] == pytest.approx(expected, rel=1e-9)
    assert "1 rows had nothing to price" in (tmp_path / "out" / "leaderboard.md").read_text()
