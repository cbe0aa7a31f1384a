"""The committed batch-invariant results (paper_figures/batch_invariant/) recompute from their committed rows.

Every table the sweep wrote (``tables/batch_invariant.{csv,md}``) must come out of the committed archive
(``rows/batch_invariant/``) again; the sweep must be the whole plan of the script (2 models x 2 datasets x
2 lookahead configurations, every arm, every sample), in bfloat16, eager, on the batch-invariant step path,
each (model, dataset) group timed on one CPU kind at one clean commit; every method's output equals the
path's AR on every sample (the issue's done-when); the path's AR cost is measured beside plain AR in every
cell; every speedup is against the faster AR arm; and every number the README quotes is one the table holds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from lade_bench import stats
from lade_bench.methods import STANDARD_PATH_REFERENCE, must_match_ar
from lade_bench.report.baselines import collect_rows
from lade_bench.report.batch_invariant import TABLE_COLUMNS, batch_invariant_table, exactness_line, render_markdown
from lade_bench.report.conditions import PROCESSOR_MIXED, PROCESSOR_UNRECORDED
from lade_bench.results.archive import cell_manifests, read_archive_cells

from .committed import EMBEDDED_MODELS, assert_each_run_timed_alone, assert_recomputes

FOLDER = Path(__file__).resolve().parents[2] / "paper_figures" / "batch_invariant"
ARCHIVE = FOLDER / "rows" / "batch_invariant"
DATASETS = {"mt_bench", "humaneval"}
SAMPLES = 20
# Per (model, dataset) the script runs two cells: the declared N5 W7 G7 (prompt lookup beside it) and the
# dataset's CPU-tuned preset (arms=[ar,ar_standard,lookahead]).
DECLARED = (5, 7, 7)
DECLARED_ARMS = {"ar", STANDARD_PATH_REFERENCE, "lookahead", "prompt_lookup"}
TUNED_ARMS = {"ar", STANDARD_PATH_REFERENCE, "lookahead"}


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    """The committed archive's rows, with each cell's dtype and processor."""
    return collect_rows([ARCHIVE])


@pytest.fixture(scope="module")
def table(rows) -> pd.DataFrame:
    """The table recomputed from those rows."""
    return batch_invariant_table(rows)


def test_the_committed_tables_recompute_from_the_committed_rows(table):
    """The CSV to 1e-9, the markdown (with its exactness line) byte for byte."""
    committed = pd.read_csv(FOLDER / "tables" / "batch_invariant.csv")
    assert list(committed.columns) == list(TABLE_COLUMNS)
    assert_recomputes(table, committed, TABLE_COLUMNS, key="arm")
    assert (FOLDER / "tables" / "batch_invariant.md").read_text() == render_markdown(table)


def test_the_sweep_is_the_whole_plan_on_the_path(rows, table):
    """8 cells (2 models x 2 datasets x 2 configurations), bfloat16 eager on the batch-invariant path,
    every arm on every sample, no unit lost to an error."""
    cells = read_archive_cells(ARCHIVE)
    assert len(cells) == 8
    assert set(table["model"]) == EMBEDDED_MODELS and set(table["dataset"]) == DATASETS
    assert set(table["dtype"]) == {"bfloat16"} and set(table["mode"]) == {stats.EAGER}
    # The path in every row of the table and of the rows: no cell here may read as a standard one.
    assert set(table["step_path"]) == {"batch_invariant"} and set(rows["step_path"]) == {"batch_invariant"}
    for (model, dataset), group in table.groupby(["model", "dataset"]):
        configs = set(zip(group["ngram"], group["window"], group["guesses"], strict=True))
        assert DECLARED in configs and len(configs) == 2, (model, dataset, configs)
        for config, cell in group.groupby(["ngram", "window", "guesses"]):
            assert set(cell["arm"]) == (DECLARED_ARMS if config == DECLARED else TUNED_ARMS), (model, dataset)
    assert rows.groupby("cell_id")["sample_id"].nunique().eq(SAMPLES).all()
    assert rows["error"].isna().all()
    assert all(len(stats.common_rows(cell)) == len(cell) for _, cell in rows.groupby("cell_id"))


def test_each_group_ran_at_one_clean_commit_on_one_cpu_kind_with_the_path_checked(table):
    """One clean commit, one core per cell, one CPU kind per group; each cell's manifest records the path's
    load-time check."""
    manifests = list(cell_manifests(ARCHIVE).values())
    assert {m["git_sha"] for m in manifests} == {manifests[0]["git_sha"]}
    assert not any(m["git_dirty"] for m in manifests)
    for m in manifests:
        assert_each_run_timed_alone(m, cores=1)
        assert m["step_path"]["path"] == "batch_invariant", m["cell_id"]
        assert m["step_path"]["check"]["attention_cases"] > 0, m["cell_id"]
    for (model, dataset), group in table.groupby(["model", "dataset"]):
        cpus = set(group["processor"])
        assert len(cpus) == 1 and not cpus & {PROCESSOR_MIXED, PROCESSOR_UNRECORDED}, (model, dataset, cpus)


def test_every_method_equals_the_paths_ar_on_every_sample(rows, table):
    """The issue's done-when: in bfloat16 on the path every greedy method's output is AR's, every sample.
    ar_standard (plain AR, a timing reference) is not held to it."""
    methods = rows[rows["arm"].map(lambda arm: arm != "ar" and must_match_ar(arm))]
    assert set(methods["arm"]) == {"lookahead", "prompt_lookup"}
    assert methods["matches_ar"].astype(bool).all(), methods.loc[
        ~methods["matches_ar"].astype(bool), ["cell_id", "arm"]
    ]
    required = table[table["must_match_ar"]]
    assert (required["matches_ar"] == 1.0).all()
    assert exactness_line(table).startswith("Every arm that must equal the path's AR did")


def test_the_paths_ar_cost_is_measured_beside_plain_ar_in_every_cell(rows, table):
    """On every cell's AR row: AR's time per token on the path over ar_standard's, on all 20 samples, with
    its interval; recomputed here from the rows' sums."""
    ar = table[table["arm"] == "ar"]
    assert len(ar) == 8 and ar["path_ar_cost"].notna().all()
    assert (ar["path_ar_cost_n"] == SAMPLES).all()
    assert (ar["path_ar_cost_ci_low"] <= ar["path_ar_cost"]).all() and (
        ar["path_ar_cost"] <= ar["path_ar_cost_ci_high"]
    ).all()
    for cell_id, cell in rows.groupby("cell_id"):
        per_token = cell.groupby("arm")["wall_time_s"].sum() / cell.groupby("arm")["new_tokens"].sum()
        (rec,) = table[(table["arm"] == "ar") & _same_cell(table, cell)].to_dict("records")
        assert rec["path_ar_cost"] == pytest.approx(per_token["ar"] / per_token[STANDARD_PATH_REFERENCE], rel=1e-9)
        faster = STANDARD_PATH_REFERENCE if per_token[STANDARD_PATH_REFERENCE] < per_token["ar"] else "ar"
        assert set(table.loc[_same_cell(table, cell), "speedup_baseline"]) == {faster}, cell_id


def _same_cell(table: pd.DataFrame, cell: pd.DataFrame) -> pd.Series:
    first = cell.iloc[0]
    return (
        (table["model"] == first["model"])
        & (table["dataset"] == first["dataset"])
        & (table["ngram"] == first["ngram"])
        & (table["window"] == first["window"])
        & (table["guesses"] == first["guesses"])
    )


def _curves() -> dict[str, dict]:
    """The committed step-cost curve of each path (one SmolLM2 curve per file)."""
    curves = {}
    for path in ("standard", "batch_invariant"):
        (file,) = sorted((FOLDER / "step_cost" / path).glob("step-cost-*.json"))
        report = json.loads(file.read_text())
        assert report["args"]["step_path"] == path
        (curve,) = report["curves"]
        assert curve["dtype"] == "bfloat16" and curve["compile_mode"] == "eager"
        curves[path] = curve
    return curves


def _relative(curve: dict) -> dict[int, float]:
    times = dict(zip(curve["token_counts"], curve["forward_time_s"], strict=True))
    return {k: t / times[1] for k, t in times.items()}


def test_both_step_cost_curves_are_committed_for_the_same_cpu():
    """The device profiles that show the step curve of each path: bench --step-cost, bfloat16 eager, one CPU."""
    curves = _curves()
    assert curves["standard"]["processor"] == curves["batch_invariant"]["processor"]
    assert curves["standard"]["threads"] == curves["batch_invariant"]["threads"] == 1


def _prose() -> str:
    text = (FOLDER / "README.md").read_text()
    start, end = text.index("<!-- batch_invariant -->"), text.index("<!-- /batch_invariant -->")
    return " ".join(re.sub(r"<!--.*?-->", "", text[start:end], flags=re.S).split())


def test_every_number_the_readme_quotes_is_in_the_table_or_the_curves():
    """Each ``1.23x`` of the README's findings is a number of the table or a step cost t(k)/t(1) of a
    committed curve, the curve sentence's numbers the curves' own, and its decimals and ranges the table's."""
    prose = _prose()
    quoted = set(re.findall(r"(\d+\.\d\d)x", prose))
    assert quoted, "the README's findings quote no number"
    table = (FOLDER / "tables" / "batch_invariant.md").read_text()
    known = set(re.findall(r"\d+\.\d\d", table))
    curves = {path: _relative(curve) for path, curve in _curves().items()}
    known |= {f"{ratio:.2f}" for curve in curves.values() for ratio in curve.values()}
    assert quoted <= known, sorted(quoted - known)
    standard, path = curves["standard"], curves["batch_invariant"]
    expected = (
        f"on the standard path a 56-token step costs {standard[56]:.2f}x a one-token step, on the batch-invariant "
        f"path {path[56]:.2f}x, with {path[2]:.2f}x already at two tokens and {path[32]:.2f}x at 32"
    )
    assert expected in prose


def test_the_readmes_ranges_and_counts_are_the_tables(rows, table):
    """The AR-cost ranges, the input tokens per step of each kind of arm and the at-cap range are the table's."""
    prose = _prose()
    ar = table[table["arm"] == "ar"]
    by_model = {m: part["path_ar_cost"] for m, part in ar.groupby("model")}
    assert f"its time per token is {ar['path_ar_cost'].min():.2f}x-{ar['path_ar_cost'].max():.2f}x plain" in prose
    gemma, smollm2 = by_model["gemma3-270m"], by_model["smollm2-135m-instruct"]
    assert (
        f"Gemma-3-270M {gemma.min():.2f}x-{gemma.max():.2f}x, SmolLM2 {smollm2.min():.2f}x-{smollm2.max():.2f}x"
        in prose
    )
    assert (ar["path_ar_cost_ci_low"] > 1).all()
    others = ar[ar["path_ar_cost"] > ar["path_ar_cost"].min()]
    assert f"every other cell's is {others['path_ar_cost'].min():.2f}x or more" in prose
    look = table[table["arm"] == "lookahead"]
    declared, tuned = look[look["window"] == 7], look[look["window"] == 2]
    prompt = table[table["arm"] == "prompt_lookup"]
    widths = (
        f"{declared['step_tokens_mean'].min():.1f}-{declared['step_tokens_mean'].max():.1f} input tokens on average "
        f"against the tuned preset's {tuned['step_tokens_mean'].min():.1f}-{tuned['step_tokens_mean'].max():.1f} "
        f"and prompt lookup's {prompt['step_tokens_mean'].min():.1f}-{prompt['step_tokens_mean'].max():.1f}"
    )
    assert widths in prose
    assert f"{table['capped_share'].min():.0%}-{table['capped_share'].max():.0%} of them stopped at the cap" in prose
    assert f"{len(rows):,} per-sample rows" in " ".join((FOLDER / "README.md").read_text().split())


def test_the_top_readme_says_where_exact_and_fast_meet_with_the_tables_numbers(table):
    """The README's bullet: the counts of cells whose interval lies above 1 (at the tables' seed; the folder
    README's claim markers hold them at every seed), the ranges of those speedups and the path's AR cost."""
    readme = " ".join((FOLDER.parents[1] / "README.md").read_text().split())
    faster = table[table["speedup_per_token_ci_low"] > 1]

    def counted(arm: str, window: int | None = None) -> tuple[int, int, pd.DataFrame]:
        mine = table[(table["arm"] == arm) & ((table["window"] == window) if window else True)]
        won = faster[(faster["arm"] == arm) & ((faster["window"] == window) if window else True)]
        return len(won), len(mine), won

    won, of, rows = counted("prompt_lookup")
    assert f"prompt lookup is faster in all {of} of its cells" in readme and won == of
    low, high = rows["speedup_per_token"].min(), rows["speedup_per_token"].max()
    assert f"({low:.2f}x-{high:.2f}x)" in readme
    won, of, rows = counted("lookahead", 2)
    low, high = rows["speedup_per_token"].min(), rows["speedup_per_token"].max()
    assert f"N5 W2 G7 in {won} of {of} ({low:.2f}x-{high:.2f}x)" in readme
    won, of, _ = counted("lookahead", 7)
    assert f"N5 W7 G7 is faster in {won} of {of}" in readme
    cost = table.loc[table["arm"] == "ar", "path_ar_cost"]
    assert f"AR costs {cost.min():.2f}x-{cost.max():.2f}x plain AR's time per token" in readme


def test_the_readmes_conditions_are_the_manifests():
    """The load range, the row chunk every linear shape took and the attention cases the README states are
    what the cells' manifests recorded."""
    manifests = list(cell_manifests(ARCHIVE).values())
    loads = [
        m["timing_conditions"][moment]["load_average"][0]
        for m in manifests
        for moment in ("start", "end")
        if m["timing_conditions"].get(moment)
    ]
    chunks = {chunk for m in manifests for chunk in m["step_path"]["check"]["linear_chunks"]}
    (cases,) = {m["step_path"]["check"]["attention_cases"] for m in manifests}
    (chunk,) = chunks
    readme = " ".join((FOLDER / "README.md").read_text().split())
    assert f"the 1-minute load at the cells' starts and ends was {min(loads):.2f}-{max(loads):.2f}" in readme
    assert f"every linear layer shape took {chunk}-row pieces, and {cases} attention cases" in readme
