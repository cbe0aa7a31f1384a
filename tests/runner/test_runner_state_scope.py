"""``method_state.scope``: a warm state per cell, or per benchmark as Spec-Bench runs it (issue 65).

Spec-Bench's ``evaluation/eval.py`` runs one process over every question in file order after a warm-up of
its first question (every turn, 3 times) on the same model object, and Token Recycling's matrix is never
reset (``inference_recycling.py``). Under ``scope=benchmark`` the cell is the benchmark: a real cell on the
tiny float64 Llama over three questions of three groups (MT-Bench's two turns first, as in the file), its
Token Recycling state warmed up first and carried across the groups; the leaderboard splits its rows by
group; a resumed run equals the uninterrupted one.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from lade_bench.metrics.text_health import text_health
from lade_bench.report.spec_bench_board import board_records, leaderboard_table
from lade_bench.report.sweep import load_sweep
from lade_bench.results import load_rows
from lade_bench.results.schema import upgrade_row
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.console import console_summary_sink
from lade_bench.runner.plan import CellConfigError

from .conftest import CONF_DIR, REPO, TINY, console_states, interrupt_generation_after

# In file order, as Spec-Bench's question.jsonl runs: MT-Bench (two turns) first, then other groups.
QUESTIONS = [
    {"question_id": 81, "category": "writing", "turns": ["Write a line about the sea.", "Now about the sky."]},
    {
        "question_id": 161,
        "category": "translation",
        "turns": ["Translate German to English: Der Hund schläft ."],
        "reference": ["The dog sleeps ."],
    },
    {"question_id": 321, "category": "qa", "turns": ["Who wrote Hamlet?"]},
]
ORDER = ["writing-81", "writing-81", "translation-161", "qa-321"]
TREE = ["token_recycling.top_k=2", "token_recycling.tree=[[0],[1],[0,0]]"]
WARMUP = 2  # rounds of the first question's two turns: 4 requests on each state before the first row
SCOPED = [*TINY, "dataset=spec_bench", "dataset.limit=null", "arms=[ar,token_recycling]", *TREE]
BENCHMARK = [*SCOPED, f"warmup={WARMUP}", "method_state.scope=benchmark"]
STATE_DEPENDENT = ["sample_id", "turn", "output_ids", "decode_steps", "accept_lengths"]
STATE_DEPENDENT += ["state_requests_seen", "state_size"]


@pytest.fixture(scope="module")
def question_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec_bench") / "question.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return path


@pytest.fixture(scope="module")
def benchmark_cell(tmp_path_factory, question_file):
    """One uninterrupted benchmark-scope cell (its folder) and what the end-of-run console table printed."""
    out = tmp_path_factory.mktemp("runs")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[*BENCHMARK, f"dataset.path={question_file}", f"output_root={out}"])
    printed: list[str] = []

    def sink(config, summary, rows, cell_dir):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            console_summary_sink(config, summary, rows, cell_dir)
        printed.append(buffer.getvalue())

    outcome = run_cell(cfg, sinks=[sink])
    return outcome.cell_dir, printed[0]


def _recycling(cell_dir) -> pd.DataFrame:
    """Token Recycling's rows in the order the cell ran them (the manifest's sample order, then turn)."""
    order = json.loads((cell_dir / "manifest.json").read_text())["method_state"]["sample_order"]
    rows = load_rows(cell_dir)
    mine = rows[rows["arm"] == "token_recycling"].copy()
    mine["position"] = mine["sample_id"].map(order.index)
    return mine.sort_values(["position", "turn"]).reset_index(drop=True)


def _state_dependent(rows: pd.DataFrame) -> list[tuple]:
    def plain(value):
        if isinstance(value, (list, tuple, np.ndarray)):
            return [int(v) for v in value]
        return None if pd.isna(value) else value

    return [tuple(map(plain, row)) for row in rows[STATE_DEPENDENT].itertuples(index=False)]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["method_state.scope=suite"], "method_state.scope='suite' is not allowed: use one of cell, benchmark"),
        (
            ["method_state.scope=benchmark", "dataset.categories=[qa]"],
            "method_state.scope=benchmark carries one state across every group of spec_bench in file order, so its "
            "cell takes them all, not dataset.categories=['qa']: drop dataset.categories (dataset.per_category_limit "
            "caps each group), or set method_state.scope=cell",
        ),
        (
            ["method_state.scope=benchmark", "method_state.mode=cold"],
            "method_state.mode=cold gives each sample a fresh one: set method_state.mode=warm, or "
            "method_state.scope=cell",
        ),
        (
            ["method_state.scope=benchmark", "dataset.shuffle_seed=3"],
            "method_state.scope=benchmark carries one state across spec_bench in file order, which "
            "dataset.shuffle_seed=3 reorders: set dataset.shuffle_seed=null, or method_state.scope=cell",
        ),
    ],
)
def test_a_scope_that_cannot_run_is_refused_in_one_line_before_anything_loads(
    compose_cfg, question_file, tmp_path, overrides, message
):
    cfg = compose_cfg([*SCOPED, f"dataset.path={question_file}", f"output_root={tmp_path}", *overrides])
    with pytest.raises(CellConfigError) as refused:
        plan_cell(cfg)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []
    # A cell with no state that learns has nothing the scope could reach: a group of its own is planned.
    stateless = [*SCOPED, "arms=[ar,lookahead]", f"dataset.path={question_file}", f"output_root={tmp_path}"]
    plan_cell(compose_cfg([*stateless, "method_state.scope=benchmark", "dataset.categories=[qa]"]))


def test_the_benchmark_scope_warms_up_on_the_state_and_carries_it_across_groups_in_file_order(benchmark_cell):
    cell_dir, printed = benchmark_cell
    rows = _recycling(cell_dir)
    assert rows["sample_id"].tolist() == ORDER and rows["matches_ar"].all() and rows["error"].isna().all()
    # The warm-up's 2 x 2 requests ran on the state first; then one state over every group, in file order.
    assert rows["state_requests_seen"].tolist() == [2 * WARMUP + i for i in range(len(ORDER))]
    sizes = rows["state_size"].tolist()
    assert sizes[0] > 0 and sizes == sorted(sizes)
    every = load_rows(cell_dir)
    assert set(every["state_scope"]) == {"benchmark"}  # every row of the cell, AR's too
    manifest = json.loads((cell_dir / "manifest.json").read_text())["method_state"]
    assert manifest["scope"] == "benchmark" and manifest["sample_order"] == list(dict.fromkeys(ORDER))
    assert manifest["warmup"] == {"sample": "writing-81", "rounds": WARMUP, "turns": 2, "max_new_tokens": 8}
    assert console_states(printed)["token_recycling"] == "warm per benchmark 4-7"


def test_the_leaderboard_splits_one_benchmark_cell_by_group_and_says_its_scope(benchmark_cell):
    cell_dir, _ = benchmark_cell
    records = board_records(load_sweep(cell_dir.parent, n_boot=50, min_ci_units=2))
    mine = records[records["arm"] == "token_recycling"].set_index("column")
    assert set(mine.index) == {"mt_bench", "translation", "qa", "overall"}
    assert mine.loc["mt_bench", "n_units"] == mine.loc["translation", "n_units"] == 1
    assert (mine.loc["translation", "state_requests_min"], mine.loc["translation", "state_requests_max"]) == (6, 6)
    table = leaderboard_table(records)
    states = dict(zip(table[table["Method"].str.startswith("Token Recycling")]["Group"], table["State"], strict=False))
    assert states["Translation"] == "warm per benchmark 6-6" and states["Overall"] == "warm per benchmark 4-7"


def test_every_arm_s_rows_record_their_text_health(benchmark_cell):
    """Issue 63: each row's repeated-4-gram share, distinct-4 and loop start are its output ids' (every arm),
    and at_cap says the output used the whole budget (the tiny model never ends a turn by itself here)."""
    rows = load_rows(benchmark_cell[0])
    assert set(rows["arm"]) == {"ar", "token_recycling"} and rows["error"].isna().all()
    for row in rows.to_dict("records"):
        ids = [int(i) for i in row["output_ids"]]
        expected = text_health(ids, row["max_new_tokens"], ())
        assert row["repeated_4gram_share"] == pytest.approx(expected["repeated_4gram_share"], nan_ok=True)
        assert row["distinct_4"] == pytest.approx(expected["distinct_4"], nan_ok=True)
        assert (None if pd.isna(row["loop_start"]) else row["loop_start"]) == expected["loop_start"]
        assert bool(row["at_cap"]) == (len(ids) == row["max_new_tokens"])


def test_a_resumed_benchmark_cell_replays_the_warm_up_and_its_rows_as_the_uninterrupted_run_had_them(
    compose_cfg, benchmark_cell, question_file, tmp_path, monkeypatch
):
    whole = _recycling(benchmark_cell[0])
    cfg = compose_cfg([*BENCHMARK, f"dataset.path={question_file}", f"output_root={tmp_path}"])
    # The warm-up's 2 rounds x 2 arms x 2 turns, then both turns of the first question: killed before the second.
    interrupt_generation_after(monkeypatch, 2 * 2 * 2 + 2 * 2, lambda: run_cell(cfg))
    assert len(load_rows(next(tmp_path.glob("*/*/rows.jsonl")).parent, verify=False)) == 4
    resumed = _recycling(run_cell(cfg).cell_dir)
    assert _state_dependent(resumed) == _state_dependent(whole)


def test_the_scope_enters_the_id_of_a_stateful_cell_only_and_committed_rows_read_as_per_cell(compose_cfg, tmp_path):
    def plan(*overrides):
        return plan_cell(compose_cfg([*TINY, f"output_root={tmp_path}", *overrides]))

    stateful = plan("arms=[ar,token_recycling]")
    benchmark = plan("arms=[ar,token_recycling]", "method_state.scope=benchmark")
    assert stateful.cell_id != benchmark.cell_id and benchmark.semantic["method_state"]["scope"] == "benchmark"
    assert plan("arms=[ar,lookahead]").cell_id == plan("arms=[ar,lookahead]", "method_state.scope=benchmark").cell_id
    # The warm-up runs on a benchmark cell's state, so it changes its rows and its id; a per-cell warm-up runs on
    # fresh states and changes neither.
    for warmup in ("warmup=2", "warmup_new_tokens=5"):
        assert plan("arms=[ar,token_recycling]", "method_state.scope=benchmark", warmup).cell_id != benchmark.cell_id
        assert plan("arms=[ar,token_recycling]", warmup).cell_id == stateful.cell_id
    # Rows written before the column existed (the committed Spec-Bench cells, one group each) read as per cell.
    committed = load_rows(REPO / "paper_figures" / "spec_bench" / "rows" / "spec_bench")
    assert len(committed) and set(committed["state_scope"]) == {"cell"}
    assert upgrade_row({})["state_scope"] == "cell"  # a JSON line of such a row too
