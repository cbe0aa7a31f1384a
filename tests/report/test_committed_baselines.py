"""The committed strong-baselines table (paper_figures/baselines/) recomputes from its committed rows.

Every table the sweep wrote (``tables/baselines.{csv,md}``, ``tables/baselines_summary.md``) must come
out of the committed archive (``rows/baselines/``) again, the sweep must be the whole plan of
``scripts/baselines_reference.sh`` (32 cells, every arm, every sample), each (model, dataset) group timed
on one CPU kind at one clean commit, and every speedup the README quotes must be one the table holds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from lade_bench import stats
from lade_bench.report.baselines import (
    TABLE_COLUMNS,
    baselines_drift,
    baselines_table,
    collect_rows,
    render_markdown,
    render_summary,
)
from lade_bench.report.conditions import PROCESSOR_MIXED, PROCESSOR_UNRECORDED
from lade_bench.results.archive import cell_manifests, read_archive_cells

from .committed import EMBEDDED_MODELS, assert_recomputes

FOLDER = Path(__file__).resolve().parents[2] / "paper_figures" / "baselines"
ARCHIVE = FOLDER / "rows" / "baselines"
DATASETS = {"mt_bench", "humaneval"}
SETTINGS = {(d, m) for d in ("float32", "bfloat16") for m in (stats.EAGER, "compiled (default)")}
SAMPLES = 20
# Per dataset, the lookahead configurations a group runs: the declared N5 W7 G7 (with prompt lookup
# beside it) and the dataset's CPU-tuned preset.
DECLARED = (5, 7, 7)


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    """The committed archive's rows, with each cell's dtype and processor."""
    return collect_rows([ARCHIVE])


@pytest.fixture(scope="module")
def table(rows) -> pd.DataFrame:
    """The table recomputed from those rows."""
    return baselines_table(rows)


def test_the_committed_tables_recompute_from_the_committed_rows(rows, table):
    """The CSV to 1e-9, the markdown table and the summary (with the drift of AR) byte for byte."""
    committed = pd.read_csv(FOLDER / "tables" / "baselines.csv")
    assert list(committed.columns) == list(TABLE_COLUMNS)
    assert_recomputes(table, committed, TABLE_COLUMNS, key="arm")
    assert (FOLDER / "tables" / "baselines.md").read_text() == render_markdown(table)
    assert (FOLDER / "tables" / "baselines_summary.md").read_text() == render_summary(table, baselines_drift(rows))


def test_the_sweep_is_the_whole_plan(rows, table):
    """32 cells (2 models x 2 datasets x 4 settings x 2 configurations), every arm on every sample."""
    cells = read_archive_cells(ARCHIVE)
    assert len(cells) == 32
    assert set(table["model"]) == EMBEDDED_MODELS and set(table["dataset"]) == DATASETS
    for (model, dataset), group in table.groupby(["model", "dataset"]):
        assert set(zip(group["dtype"], group["mode"], strict=True)) == SETTINGS, (model, dataset)
        configs = set(zip(group["ngram"], group["window"], group["guesses"], strict=True))
        assert DECLARED in configs and len(configs) == 2, (model, dataset, configs)
        for config, by_config in group.groupby(["ngram", "window", "guesses"]):
            arms = {"ar", "lookahead", "prompt_lookup"} if config == DECLARED else {"ar", "lookahead"}
            for _, cell in by_config.groupby(["dtype", "mode"]):
                assert set(cell["arm"]) == arms, (model, dataset, config)
    assert rows.groupby("cell_id")["sample_id"].nunique().eq(SAMPLES).all()
    # No arm of any cell lost a unit to an error: every arm is paired with AR on every unit it ran.
    assert all(len(stats.common_rows(cell)) == len(cell) for _, cell in rows.groupby("cell_id"))


def test_each_group_ran_at_one_clean_commit_on_one_cpu_kind(table):
    """One clean commit, one core per cell, one CPU kind per group, so every AR gain exists."""
    manifests = list(cell_manifests(ARCHIVE).values())
    assert {m["git_sha"] for m in manifests} == {manifests[0]["git_sha"]}
    assert not any(m["git_dirty"] for m in manifests)
    for m in manifests:
        # Pinned to one core, as every committed CPU timing is.
        assert len(m["timing_conditions"]["cpu_affinity"]) == 1, m["cell_id"]
    for (model, dataset), group in table.groupby(["model", "dataset"]):
        cpus = set(group["processor"])
        assert len(cpus) == 1 and not cpus & {PROCESSOR_MIXED, PROCESSOR_UNRECORDED}, (model, dataset, cpus)
    # So every AR row has its gain over eager float32 AR, on all the units both cells ran.
    ar = table[table["arm"] == stats.BASELINE_ARM]
    assert ar["ar_gain"].notna().all()
    assert (ar["ar_gain_n"] == ar["n_units"]).all()


def test_greedy_float32_lookahead_and_prompt_lookup_give_ar_tokens(table):
    """Exactness where the arithmetic allows it: in float32 every greedy arm matches AR on every unit.

    In bfloat16 a near tie may flip (the runner records each with its margins); the table's
    ``matches_ar`` says how many, and the README says so.
    """
    fp32 = table[(table["dtype"] == "float32") & (table["arm"] != stats.BASELINE_ARM)]
    assert (fp32["matches_ar"] == 1.0).all(), fp32.loc[fp32["matches_ar"] < 1, ["model", "dataset", "mode", "arm"]]


def test_every_speedup_the_readme_quotes_is_in_the_table():
    """The README's summary is the recomputed one, and each ``1.23x`` of its prose is a number of the table."""
    readme = (FOLDER / "README.md").read_text()
    summary = (FOLDER / "tables" / "baselines_summary.md").read_text()
    block = re.search(r"<!-- summary -->\n(.*?)<!-- /summary -->", readme, re.S)
    assert block is not None and block.group(1) == summary
    prose = readme.replace(block.group(0), "")
    quoted = re.findall(r"\d+\.\d\dx", prose)
    assert quoted, "the README's paragraph quotes no number"
    known = set(re.findall(r"\d+\.\d\dx", (FOLDER / "tables" / "baselines.md").read_text()))
    assert set(quoted) <= known, set(quoted) - known
