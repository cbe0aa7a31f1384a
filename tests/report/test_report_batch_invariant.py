"""The batch-invariant sweep's table (issue 68) from a real ``+sweep=batch_invariant`` run on the command line.

One cell of the plan, cut small (the embedded SmolLM2 in bfloat16 on the batch-invariant step path, two
MT-Bench questions, 8 new tokens): AR on the path, ``ar_standard`` (plain bfloat16 AR) beside it,
lookahead and prompt lookup. The table's numbers are checked against the rows with arithmetic written
here (sums of the rows' times and tokens), not by the functions that made them; the written tables must
recompute from the archive they were written with; the strong-baselines table, which has no step-path
column, refuses the sweep; the figures draw ``ar_standard`` as a reference, not as a method.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from lade_bench import stats
from lade_bench.methods import STANDARD_PATH_REFERENCE
from lade_bench.report.baselines import collect_rows
from lade_bench.report.baselines import main as baselines_main
from lade_bench.report.batch_invariant import TABLE_COLUMNS, batch_invariant_table, render_markdown
from lade_bench.report.figures import draw_accept_histogram
from lade_bench.results import load_rows, read_index
from lade_bench.results.archive import is_archive

MAX_NEW_TOKENS = 8
SWEEP = [
    "+sweep=batch_invariant", "model=smollm2", "dataset=mt_bench", "dataset.limit=2",
    f"max_new_tokens={MAX_NEW_TOKENS}", "warmup=0", "wandb.mode=disabled", "device_profile.enabled=false",
]  # fmt: skip
ARMS = {"ar", "ar_standard", "lookahead", "prompt_lookup"}
# A real command-line cell of the embedded model (about half a minute on one core).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(cli_server, tmp_path_factory):
    """One real cell of the plan, run from the command line: (its sweep folder, the run's console output)."""
    root = tmp_path_factory.mktemp("runs")
    result = cli_server.run([*SWEEP, f"output_root={root}"], cwd=root, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return root / "batch_invariant", result.stdout


@pytest.fixture(scope="module")
def sweep(run):
    """The sweep folder of the cell."""
    return run[0]


@pytest.fixture(scope="module")
def written(cli_server, sweep, tmp_path_factory):
    """``python -m lade_bench.report.batch_invariant SWEEP --out OUT``'s folder."""
    out = tmp_path_factory.mktemp("paper_figures") / "batch_invariant"
    result = cli_server.run([str(sweep), "--out", str(out)], cwd=out.parent, module="lade_bench.report.batch_invariant")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "batch-invariant table:" in result.stdout
    return out


@pytest.fixture(scope="module")
def rows(sweep) -> pd.DataFrame:
    """The sweep's rows as written, every arm on both questions without an error."""
    rows = load_rows(sweep)
    assert set(rows["arm"]) == ARMS and rows["error"].isna().all()
    return rows


def _per_token(rows: pd.DataFrame) -> float:
    return rows["wall_time_s"].sum() / rows["new_tokens"].sum()


def test_every_number_of_the_table_is_the_rows_arithmetic(rows, written):
    table = pd.read_csv(written / "tables" / "batch_invariant.csv")
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert set(table["arm"]) == ARMS and len(table) == len(ARMS)
    by_arm = {arm: group for arm, group in rows.groupby("arm")}
    # No arm lost a unit, so every arm's paired rows are all its rows.
    keys = {arm: set(zip(g["sample_id"], g["turn"], g["repeat"], strict=True)) for arm, g in by_arm.items()}
    assert all(k == keys["ar"] for k in keys.values())
    cost = {arm: _per_token(group) for arm, group in by_arm.items()}
    faster = "ar_standard" if cost["ar_standard"] < cost["ar"] else "ar"
    for rec in table.to_dict("records"):
        arm_rows = by_arm[rec["arm"]]
        assert rec["step_path"] == "batch_invariant" and rec["dtype"] == "bfloat16" and rec["mode"] == "eager"
        assert rec["n_units"] == 2 == arm_rows["sample_id"].nunique()
        assert rec["speedup_baseline"] == faster
        assert rec["speedup_per_token"] == pytest.approx(cost[faster] / cost[rec["arm"]], rel=1e-12)
        # Two samples are too few for an interval (the suite's rule): the ends are empty, not invented.
        assert math.isnan(rec["speedup_per_token_ci_low"]) and math.isnan(rec["speedup_per_token_ci_high"])
        if rec["arm"] == "ar":  # the reference: no share of itself, none required
            assert arm_rows["matches_ar"].isna().all() and math.isnan(rec["matches_ar"])
        else:
            assert rec["matches_ar"] == pytest.approx(arm_rows["matches_ar"].astype(float).mean())
        assert bool(rec["must_match_ar"]) == (rec["arm"] in {"lookahead", "prompt_lookup"})
        steps = arm_rows["decode_steps"].sum()
        assert rec["compression_ratio"] == pytest.approx(arm_rows["new_tokens"].sum() / steps)
        decode_widths = [w for widths in arm_rows["step_tokens"] for w in list(widths)[1:]]
        assert rec["step_tokens_mean"] == pytest.approx(sum(decode_widths) / len(decode_widths))
        # At the cap: the budget reached without a stop token (the rows' own text-health column, issue 63).
        at_cap = (arm_rows["new_tokens"] >= MAX_NEW_TOKENS) & arm_rows["at_cap"].astype(bool)
        assert rec["capped_share"] == pytest.approx(at_cap.mean())
        if rec["arm"] == "ar":
            # The path's AR cost: its time per token over plain AR's, on the same two questions.
            assert rec["path_ar_cost"] == pytest.approx(cost["ar"] / cost["ar_standard"], rel=1e-12)
            assert rec["path_ar_cost_n"] == 2 and math.isnan(rec["path_ar_cost_ci_low"])
        else:
            assert math.isnan(rec["path_ar_cost"]) and rec["path_ar_cost_n"] == 0
    # On the path every method equals its AR (and AR itself trivially).
    assert (table.loc[table["must_match_ar"], "matches_ar"] == 1.0).all()


def test_the_markdown_shows_the_path_on_every_row_and_labels_the_reference(written):
    text = (written / "tables" / "batch_invariant.md").read_text()
    body = [line for line in text.splitlines()[2:] if line.startswith("|")]
    assert len(body) == len(ARMS)
    for line in body:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2:5] == ["bfloat16", "eager", "batch_invariant"], line
    arms = {[c.strip() for c in line.strip("|").split("|")][6]: line for line in body}
    standard = arms["ar_standard"]
    assert "(not required: a timing reference)" in standard
    assert "Every arm that must equal the path's AR did on every paired unit" in text
    ar = arms["ar"]
    table = pd.read_csv(written / "tables" / "batch_invariant.csv").set_index("arm")
    assert f"{table.loc['ar', 'path_ar_cost']:.2f}x (n=2)" in ar


def test_the_written_tables_recompute_from_the_written_archive(rows, written):
    archive = written / "rows" / "batch_invariant"
    assert is_archive(archive)
    archived = collect_rows([archive])
    assert len(archived) == len(rows)
    recomputed = batch_invariant_table(archived)
    committed = pd.read_csv(written / "tables" / "batch_invariant.csv")
    pd.testing.assert_frame_equal(recomputed, committed, check_dtype=False, check_exact=False, rtol=1e-12)
    assert (written / "tables" / "batch_invariant.md").read_text() == render_markdown(recomputed)


def test_the_baselines_table_refuses_a_batch_invariant_sweep_it_would_show_as_standard(sweep, tmp_path, capsys):
    assert baselines_main([str(sweep), "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "step_path ['batch_invariant']" in error and "python -m lade_bench.report.batch_invariant" in error
    assert not (tmp_path / "tables" / "baselines.md").exists()


def test_the_histogram_draws_ar_standard_as_a_reference_not_a_method(rows):
    """ar_standard records a step per token like AR: drawn beside the methods it would read as one."""
    assert rows.loc[rows["arm"] == "ar_standard", "accept_lengths"].map(len).gt(0).all()
    figure = draw_accept_histogram(rows, "title", "context")
    labels = [t.get_text() for ax in figure.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert len(labels) == 2 and not any(label.startswith(("AR", "ar")) for label in labels), labels


def test_the_cell_on_the_path_says_so_everywhere_and_its_methods_equal_ar(run, rows):
    """The index, folder, rows and manifest name the path; every method equals the path's AR; every speedup is
    against the faster AR arm by the rows' own summed times, and summary.json and the console say which."""
    sweep, stdout = run
    (entry,) = read_index(sweep)
    assert entry["status"] == "done" and entry["step_path"] == "batch_invariant"
    cell_dir = sweep / entry["cell_dir"]
    assert "-greedy-bi-" in cell_dir.name
    assert set(rows["step_path"]) == {"batch_invariant"} and (rows["new_tokens"] == MAX_NEW_TOKENS).all()
    assert rows.loc[rows["arm"].isin(["lookahead", "prompt_lookup"]), "matches_ar"].all()
    standard = rows[rows["arm"] == STANDARD_PATH_REFERENCE]
    assert len(standard) == len(rows[rows["arm"] == "ar"]) and standard["matches_ar"].notna().all()
    paired = stats.common_rows(rows)
    times = paired.groupby("arm")["wall_time_s"].sum()
    faster = STANDARD_PATH_REFERENCE if times[STANDARD_PATH_REFERENCE] < times["ar"] else "ar"
    assert stats.speedup_baseline(paired, sampled=False) == faster
    summary = json.loads((cell_dir / "summary.json").read_text())
    assert summary["speedup_baseline"] == faster
    slower = "ar" if faster == STANDARD_PATH_REFERENCE else STANDARD_PATH_REFERENCE
    assert "speedup" not in summary["arms"][faster]
    assert summary["arms"][slower]["speedup"] == pytest.approx(times[faster] / times[slower])
    records = {rec["arm"]: rec for rec in stats.summarize_cell(rows)}
    assert records[faster]["speedup_ci_note"] == "baseline" and records[faster]["speedup"] == 1.0
    assert f"speedups are against {faster}: the faster of the cell's two AR arms" in stdout
    # What the load-time check ran on this CPU: every GEMM shape of SmolLM2 (its LM head too) with its row
    # chunk, the row counts compared through it, the attention cases.
    record = json.loads((cell_dir / "manifest.json").read_text())["step_path"]
    assert record["path"] == "batch_invariant"
    assert [576, 49152] in record["check"]["linear_shapes"] and record["check"]["attention_cases"] > 0
    assert 33 in record["check"]["linear_row_counts"]
    assert len(record["check"]["linear_chunks"]) == len(record["check"]["linear_shapes"])
