"""Spec-Bench end to end on a small real sweep: answer files out (read back the way Spec-Bench's
speed.py and equal.py read them), the leaderboard pairing each method with its own cell's AR, external
answer files beside it and never mixed in, and a figure a reader can read.

The sweep is three real cells of `+sweep=spec_bench` on the tiny float64 Llama (exact: every greedy
output equals AR's), a few tokens, one question of each of four short-prompt categories: the
every-method cell over all four, and the paper-setting lookahead cell split in two (so an entry pools
two cells, each unit paired with its own cell's AR).
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text
from transformers import AutoTokenizer

from lade_bench.conf import PACKAGE_CONF_DIR
from lade_bench.export import AnswerFileError, read_answer_file
from lade_bench.export.__main__ import main as export_main
from lade_bench.export.spec_bench_records import read_questions
from lade_bench.models.embedded import converted_smollm2_dir
from lade_bench.report.build import build_report
from lade_bench.report.spec_bench_board import EXTERNAL, board_records, draw_board
from lade_bench.report.sweep import load_sweep
from lade_bench.results import load_rows
from lade_bench.runner import register_configs, run_cell

CATEGORIES = ["writing", "translation", "qa", "math_reasoning"]
GROUP = {"writing": "mt_bench", "translation": "translation", "qa": "qa", "math_reasoning": "math_reasoning"}
BASE = [
    "+sweep=spec_bench",
    "model=tiny_llama",
    "dtype=float64",
    "device=cpu",
    "max_new_tokens=5",
    "warmup=0",
    "wandb.mode=disabled",
    "device_profile.enabled=false",
    "dataset.per_category_limit=1",
    # Cells of some groups each (the pooling under test): per cell, as the committed results ran.
    "method_state.scope=cell",
]
# The every-method cell's arms as declared, less Jacobi, SuffixDecoding, SAM-Decoding and PIA (the suite's CPU
# budget; their cells are tested with their engines): what is tested here is the plumbing every arm shares,
# with a stateless drafter, a stateful one (Token Recycling) and lookahead at two settings.
ARMS = "arms=[ar,lookahead,prompt_lookup,token_recycling]"
CELLS = (
    ("every_method", CATEGORIES),
    ("paper_lookahead", ["writing", "translation"]),
    ("paper_lookahead", ["qa", "math_reasoning"]),
)


@pytest.fixture(scope="module")
def spec_sweep(tmp_path_factory, shared_data_dir) -> Path:
    question_file = shared_data_dir / "spec_bench" / "question.jsonl"
    if not question_file.is_file():
        pytest.skip(f"{question_file} not found")
    out = tmp_path_factory.mktemp("spec_bench_runs")
    register_configs()
    for variant, categories in CELLS:
        overrides = [
            *BASE,
            f"spec_bench={variant}",
            *([ARMS] if variant == "every_method" else []),
            f"dataset.categories=[{','.join(categories)}]",
            f"dataset.path={question_file}",
            f"output_root={out}",
        ]
        with initialize_config_dir(config_dir=str(PACKAGE_CONF_DIR), version_base="1.3"):
            run_cell(compose("config", overrides=overrides))
    return out / "spec_bench"


@pytest.fixture(scope="module")
def rows(spec_sweep) -> pd.DataFrame:
    frame = load_rows(spec_sweep)
    assert frame["error"].isna().all() and frame["matches_ar"].dropna().all()
    return frame


@pytest.fixture(scope="module")
def loaded(spec_sweep):
    """The sweep as the report loads it, intervals from 2 samples on (the test cells have 1-4)."""
    return load_sweep(spec_sweep, n_boot=200, min_ci_units=2)


@pytest.fixture(scope="module")
def answers(spec_sweep, tmp_path_factory) -> Path:
    """The sweep's answer files as ``python -m lade_bench.export spec-bench SWEEP --out DIR`` writes them."""
    out = tmp_path_factory.mktemp("answers")
    assert export_main(["spec-bench", str(spec_sweep), "--out", str(out)]) == 0
    return out


def _speed_py(records: list[dict], categories: set[str]) -> float:
    """Spec-Bench's evaluation/speed.py, per question: sum(new_tokens) / sum(wall_time) of choices[0]."""
    chosen = [r["choices"][0] for r in records if r["category"] in categories]
    return float(np.mean([sum(c["new_tokens"]) / sum(c["wall_time"]) for c in chosen]))


def _read(path: Path) -> list[dict]:
    """An independent reader: the JSON lines as Spec-Bench's scripts read them (json.loads per line)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _kinds(rows: pd.DataFrame) -> tuple[str, str]:
    """The ids naming the two kinds of cell: the every-method cell's and the first paper-lookahead cell's."""
    every = rows[rows["arm"] == "prompt_lookup"]["cell_id"].iloc[0]
    return every, min(rows[(rows["arm"] == "lookahead") & (rows["window"] == 15)]["cell_id"])


def test_answer_files_round_trip_and_read_as_spec_bench_reads_them(answers, rows, question_file, tmp_path):
    names = sorted(p.stem for p in answers.glob("*.jsonl"))
    every, paper = _kinds(rows)
    # AR and lookahead ran in two kinds of cell: one file per kind, named by its first cell; the rest one file
    # each. The lookahead shape is in lookahead's names only.
    assert names == sorted(
        [
            f"tiny-llama-ar-{paper}",
            f"tiny-llama-ar-{every}",
            f"tiny-llama-lookahead-n5-w15-g15-pool-{paper}",
            f"tiny-llama-lookahead-n5-w7-g7-{every}",
            f"tiny-llama-prompt_lookup-{every}",
            f"tiny-llama-token_recycling-{every}",
        ]
    )
    for name in names:
        records = _read(answers / f"{name}.jsonl")
        assert [r["question_id"] for r in records] == sorted(r["question_id"] for r in records)
        assert {r["category"] for r in records} == set(CATEGORIES) and {r["model_id"] for r in records} == {name}
        for record in records:
            (choice,) = record["choices"]
            assert choice["index"] == 0
            sample_id = f"{record['category']}-{record['question_id']}"
            cell_id = record["answer_id"].removesuffix(f"-{sample_id}")
            arm = name.removeprefix("tiny-llama-").split("-")[0]
            mine = rows[(rows["cell_id"] == cell_id) & (rows["sample_id"] == sample_id) & (rows["arm"] == arm)]
            mine = mine.sort_values("turn")
            # One entry per turn (MT-Bench: two), as the rows hold them.
            assert len(choice["turns"]) == len(mine) == (2 if record["category"] == "writing" else 1)
            assert choice["turns"] == list(mine["output_text"])
            assert choice["new_tokens"] == list(mine["new_tokens"])
            # Token Recycling's authors' prefill (prompt[:-1]) emits nothing: their loop counts it as no step.
            silent = 1 if arm == "token_recycling" else 0
            assert choice["decoding_steps"] == [steps - silent for steps in mine["decode_steps"]]
            assert all(length > 0 for length in choice["accept_lengths"])
            assert choice["wall_time"] == pytest.approx(list(mine["wall_time_s"]), abs=0)
            # Spec-Bench's counts: one accepted length per forward, the prefill's token included.
            assert len(choice["accept_lengths"]) == sum(choice["decoding_steps"])
            assert sum(choice["accept_lengths"]) == sum(choice["new_tokens"])
    # speed.py: the mean over questions of tokens/s, method over baseline, each method against the AR file
    # of its own cells; the same number from the rows directly.
    for method, base in (
        (f"lookahead-n5-w15-g15-pool-{paper}", f"ar-{paper}"),
        (f"prompt_lookup-{every}", f"ar-{every}"),
    ):
        ours, ar = _read(answers / f"tiny-llama-{method}.jsonl"), _read(answers / f"tiny-llama-{base}.jsonl")
        arm = method.split("-")[0]
        in_cells = rows[rows["cell_id"].isin({r["answer_id"].split("-")[0] for r in ours})]
        for category in CATEGORIES:
            expected = []
            for name in (arm, "ar"):
                part = in_cells[(in_cells["arm"] == name) & in_cells["sample_id"].str.startswith(f"{category}-")]
                per_q = part.groupby("sample_id").agg(tok=("new_tokens", "sum"), t=("wall_time_s", "sum"))
                expected.append(float((per_q["tok"] / per_q["t"]).mean()))
            assert _speed_py(ours, {category}) / _speed_py(ar, {category}) == pytest.approx(expected[0] / expected[1])
        # equal.py: a greedy method's texts equal AR's, question by question.
        assert [str(r["choices"][0]["turns"]) for r in ours] == [str(r["choices"][0]["turns"]) for r in ar]
    # Our reader takes them back, and refuses a corrupted copy naming the line.
    questions = read_questions(question_file)
    token_recycling = f"tiny-llama-token_recycling-{every}"
    assert read_answer_file(answers / f"{token_recycling}.jsonl", questions).model_id == token_recycling
    lines = (answers / f"{token_recycling}.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    broken["choices"][0]["wall_time"] = broken["choices"][0]["wall_time"] + [1.0]
    (tmp_path / "broken.jsonl").write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n")
    with pytest.raises(AnswerFileError, match=r"broken.jsonl:2: choices\[0\].wall_time: .*one per turn"):
        read_answer_file(tmp_path / "broken.jsonl", questions)


def test_leaderboard_pairs_each_method_with_the_ar_of_its_own_cells(loaded, rows):
    records = board_records(loaded).set_index(["arm", "setting", "column"])
    assert set(records.index.get_level_values("column")) == {*GROUP.values(), "overall"}
    for setting, variant_cells in (("n5-w15-g15-pool", 2), ("n5-w7-g7", 1)):
        lookahead = rows[(rows["arm"] == "lookahead") & (rows["window"] == (15 if "w15" in setting else 7))]
        cells = set(lookahead["cell_id"])
        assert len(cells) == variant_cells
        ar = rows[(rows["arm"] == "ar") & rows["cell_id"].isin(cells)]
        overall = records.loc[("lookahead", setting, "overall")]
        # Ratio of summed wall times over every paired sample of its cells, against those cells' AR only.
        assert overall["speedup"] == pytest.approx(ar["wall_time_s"].sum() / lookahead["wall_time_s"].sum())
        assert overall["n_units"] == 4 and overall["speedup_ci_low"] <= overall["speedup"] <= overall["speedup_ci_high"]
        for category, group in GROUP.items():
            one = records.loc[("lookahead", setting, group)]
            t_ar, t_la = (
                f[f["sample_id"].str.startswith(f"{category}-")]["wall_time_s"].sum() for f in (ar, lookahead)
            )
            assert one["speedup"] == pytest.approx(t_ar / t_la)
            assert one["n_units"] == 1 and one["speedup_ci_note"].startswith("no interval")
    tr = records.loc[("token_recycling", "", "overall")]
    assert tr["state_mode"] == "warm per cell" and tr["state_requests_max"] > tr["state_requests_min"] == 0
    assert np.isnan(records.loc[("prompt_lookup", "", "overall")]["state_requests_max"])
    assert records.loc[("prompt_lookup", "", "translation")]["quality"].startswith("sentence BLEU (mean) ")
    assert records.loc[("prompt_lookup", "", "math_reasoning")]["quality"].startswith("accuracy ")
    assert "judged by an LLM" in records.loc[("token_recycling", "", "mt_bench")]["quality"]
    assert "no reference answers" in records.loc[("token_recycling", "", "qa")]["quality"]
    width = records.loc[("lookahead", "n5-w7-g7", "overall")]["step_tokens_mean"]
    assert width > records.loc[("prompt_lookup", "", "overall")]["step_tokens_mean"] >= 1.0
    assert (records["matches_ar"] == 1.0).all()


def test_every_method_entry_shows_speed_py_beside_ours(loaded, answers, rows):
    """Spec-Bench's own numbers beside ours (issue 65), per entry and column, from the exported files as
    speed.py reads them: the mean over the method's questions of tokens/s over the same mean of its cells'
    AR file, AR's tokens re-counted as ``len(tokenizer(turn).input_ids) - 1`` with the tiny Llama's
    tokenizer (SmolLM2's, no BOS: the ``- 1`` drops a real token), and the mean of ``accept_lengths``."""
    tokenizer = AutoTokenizer.from_pretrained(converted_smollm2_dir())
    every, paper = _kinds(rows)
    records = board_records(loaded)
    assert set(records["arm"]) == {"lookahead", "prompt_lookup", "token_recycling"}
    for rec in records.to_dict("records"):
        kind = paper if rec["setting"] == "n5-w15-g15-pool" else every
        name = "-".join(part for part in ("tiny-llama", rec["arm"], rec["setting"], kind) if part)
        ours, ar = _read(answers / f"{name}.jsonl"), _read(answers / f"tiny-llama-ar-{kind}.jsonl")
        wanted = {c for c, g in GROUP.items() if rec["column"] in (g, "overall")}
        ar_speed = np.mean(
            [
                sum(len(tokenizer(turn).input_ids) - 1 for turn in r["choices"][0]["turns"])
                / sum(r["choices"][0]["wall_time"])
                for r in ar
                if r["category"] in wanted
            ]
        )
        assert rec["speedpy_speedup"] == pytest.approx(_speed_py(ours, wanted) / ar_speed), (name, rec["column"])
        accepted = [a for r in ours if r["category"] in wanted for a in r["choices"][0]["accept_lengths"]]
        assert rec["speedpy_tau"] == pytest.approx(np.mean(accepted))


def test_external_answer_files_sit_beside_and_never_enter_a_paired_number(
    spec_sweep, answers, rows, question_file, tmp_path
):
    # A Spec-Bench user's files: another model id, another machine's times (twice as slow for the method).
    published = {}
    every, _ = _kinds(rows)
    for ours, theirs, scale in (
        (f"ar-{every}", "vicuna-7b-v1.3-vanilla", 1.0),
        (f"prompt_lookup-{every}", "vicuna-7b-v1.3-pld", 2.0),
    ):
        records = _read(answers / f"tiny-llama-{ours}.jsonl")
        for record in records:
            record["model_id"] = theirs
            record["choices"][0]["wall_time"] = [t * scale for t in record["choices"][0]["wall_time"]]
        published[theirs] = tmp_path / f"{theirs}.jsonl"
        published[theirs].write_text("".join(json.dumps(r) + "\n" for r in records))
    files = [published["vicuna-7b-v1.3-vanilla"], published["vicuna-7b-v1.3-pld"]]
    result = build_report(
        spec_sweep,
        tmp_path / "report",
        html=False,
        n_boot=200,
        min_ci_units=2,
        spec_bench_answers=files,
        spec_bench_questions=question_file,
    )
    sweep = result.sweep
    alone = board_records(sweep)
    together = board_records(sweep, [read_answer_file(f, read_questions(question_file)) for f in files])
    external = together[together["source"] == EXTERNAL]
    # Ours are unchanged by the external files; theirs carry Spec-Bench's arithmetic and no interval.
    pd.testing.assert_frame_equal(together[together["source"] != EXTERNAL].reset_index(drop=True), alone)
    ours_pl = alone[(alone["arm"] == "prompt_lookup")].set_index("column")["speedup"]
    theirs = external.set_index("column")
    assert set(theirs["model"]) == {"vicuna-7b-v1.3-pld"} and theirs["speedup_ci_low"].isna().all()
    for column in ("mt_bench", "translation"):  # one question each: speed.py's ratio is the time ratio, halved
        assert theirs.loc[column, "speedup"] == pytest.approx(ours_pl[column] / 2.0)
    board = (result.out_dir / "tables" / "spec_bench_leaderboard.md").read_text()
    assert "external: vicuna-7b-v1.3-pld" in board and "| tiny-llama | Prompt lookup |" in board
    assert {"spec_bench_leaderboard", "spec_bench_speedups"} <= set(result.tables)
    assert any(f.name == "spec_bench_leaderboard" and f.png.is_file() for f in result.figures)
    # A method's file without its baseline's is refused before anything is loaded or written.
    with pytest.raises(ValueError, match="baseline's answer file first"):
        build_report(
            spec_sweep, tmp_path / "again", html=False, spec_bench_answers=files[:1], spec_bench_questions=question_file
        )
    assert not (tmp_path / "again").exists()


def test_the_leaderboard_figure_is_readable(loaded):
    fig = draw_board(board_records(loaded), loaded.context_line())
    FigureCanvasAgg(fig)
    fig.draw_without_rendering()  # laid out as when saved; positions are all that is read
    renderer = fig.canvas.get_renderer()
    bounds = fig.bbox
    titles = [t for t in [fig._suptitle, *(ax.title for ax in fig.axes)] if t is not None and t.get_text()]
    for title in titles:
        box = title.get_window_extent(renderer)
        assert box.x0 >= bounds.x0 and box.x1 <= bounds.x1 and box.y0 >= bounds.y0 and box.y1 <= bounds.y1
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    assert not [(a, b) for (a, x), (b, y) in itertools.combinations(boxes, 2) if x.overlaps(y)]
    assert all("n=" in ax.get_title() for ax in fig.axes)  # every panel says its n
    # The overall panel draws intervals (4 samples, min 2 here); single-sample groups draw points only.
    overall = fig.axes[-1]
    assert overall.get_title().startswith("Overall") and any(
        isinstance(c, ErrorbarContainer) for c in overall.containers
    )
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "Lookahead (n5-w7-g7)" in labels and "Lookahead (n5-w15-g15-pool)" in labels and "Token Recycling" in labels


def test_the_console_table_shows_a_translation_cell_s_bleu(spec_sweep):
    """The runner's console table names the reference metrics a cell's summary.json holds."""
    from rich.console import Console

    from lade_bench.runner.console import summary_table
    from lade_bench.runner.summary import summarize_cell

    rows = load_rows(spec_sweep)
    paper = rows[(rows["window"] == 15) & rows["sample_id"].str.startswith("translation-")]
    summary = summarize_cell(paper[paper["cell_id"] == paper["cell_id"].iloc[0]], n_boot=50)
    arm = summary["arms"]["lookahead"]
    assert {"sentence_bleu", "chrf"} <= set(arm) and "bleu" not in arm and "accuracy" not in arm
    console = Console(record=True, width=200)
    console.print(summary_table(summary))
    # Each BLEU named for what it is: the mean of sentence BLEU, and corpus BLEU from the rows' BLEU counts.
    bleu, corpus = summary["arms"]["ar"]["sentence_bleu"], summary["arms"]["ar"]["corpus_bleu"]
    assert f"sentence BLEU (mean) {bleu:.1f} corpus BLEU {corpus:.1f} chrF" in console.export_text()


# --- Answer files without a model run: exported from the committed archive, or written by hand -------------

ARCHIVE = Path(__file__).resolve().parents[2] / "paper_figures" / "spec_bench" / "rows" / "spec_bench"
SHAPE = re.compile(r"-n\d+-w\d+-g\d+")


@pytest.fixture(scope="module")
def question_file(shared_data_dir) -> Path:
    path = shared_data_dir / "spec_bench" / "question.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


@pytest.fixture(scope="module")
def committed_answers(tmp_path_factory) -> Path:
    """The committed Spec-Bench archive's answer files, as the export command writes them."""
    out = tmp_path_factory.mktemp("committed_answers")
    assert export_main(["spec-bench", str(ARCHIVE), "--out", str(out)]) == 0
    return out


def test_exported_names_say_the_cell_kind_and_the_arm_and_pair_by_their_ending(committed_answers, question_file):
    cells = pd.DataFrame(json.loads((ARCHIVE / "cells.json").read_text(encoding="utf-8")))
    rows = load_rows(ARCHIVE)
    arms_of = rows.groupby("cell_id")["arm"].agg(lambda a: frozenset(a))
    questions = read_questions(question_file)
    files = sorted(committed_answers.glob("*.jsonl"))
    by_name = {f.stem: f for f in files}
    # 2 models x (every-method cells: 8 arms, paper-lookahead cells: 2, REST cells: 2), each kind spanning 6 groups.
    assert len(files) == 24
    for name, file in by_name.items():
        answers = read_answer_file(file, questions)  # our own files pass the import's checks, turn counts included
        assert answers.model_id == name
        cell_ids = {r["answer_id"].split("-")[0] for r in answers.records}
        assert len(cell_ids) == 6 and name.endswith("-" + min(cell_ids))  # named by its first cell's id
        (arms,) = {arms_of[c] for c in cell_ids}  # one kind of cell: the same arms in every cell
        (model,) = set(rows[rows["cell_id"].isin(cell_ids)]["model"])
        arm = next(a for a in arms if name.startswith(f"{model}-{a}-"))
        # A lookahead shape only in a lookahead arm's name, and there the one its cells ran.
        if arm == "lookahead":
            dirs = set(cells[cells["cell_id"].isin(cell_ids)]["cell_dir"])
            shape = SHAPE.search(name).group(0)  # -n5-w7-g7 -> N5W7G7 in the folder names
            tag = shape.replace("-n", "N").replace("-w", "W").replace("-g", "G")
            tag += "ref" if name.endswith("-pool-" + min(cell_ids)) else ""
            assert all(f"-{tag}-greedy-" in d for d in dirs)
        else:
            assert not SHAPE.search(name) and "pool" not in name
        # Every method's file has the AR file of its own cells: the same ending.
        assert f"{model}-ar-{min(cell_ids)}" in by_name
    rest_ar = [n for n in by_name if "-ar-" in n and f"{n.split('-ar-')[0]}-rest-{n.split('-ar-')[1]}" in by_name]
    assert len(rest_ar) == 2 and not any(SHAPE.search(n) for n in rest_ar)


def _choice(n_turns: int) -> dict:
    return {
        "index": 0,
        "turns": ["An answer."] * n_turns,
        "decoding_steps": [3] * n_turns,
        "new_tokens": [4] * n_turns,
        "wall_time": [0.5] * n_turns,
        "accept_lengths": [1, 2, 1] * n_turns,
    }


def _record(question_id: int, category: str, n_turns: int) -> dict:
    return {
        "question_id": question_id,
        "category": category,
        "answer_id": f"a{question_id}",
        "model_id": "vicuna-7b-v1.3-pld",
        "choices": [_choice(n_turns)],
    }


def _lines(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


WRITING, TRANSLATION = _record(81, "writing", 2), _record(161, "translation", 1)


def _without(field: str) -> dict:
    record = json.loads(json.dumps(TRANSLATION))
    del record["choices"][0][field]
    return record


def _with(**changes) -> dict:
    return {**json.loads(json.dumps(TRANSLATION)), **changes}


# (file text, line, the start of the message after "<file>:<line>: ")
MALFORMED = {
    "not JSON": (_lines(WRITING, '{"question_id": 161,'), 2, "not JSON (Expecting property name"),
    "not an object": (_lines(WRITING, "[161, 2]"), 2, "record: a JSON object expected, got an array"),
    "missing field": (_lines(WRITING, _without("wall_time")), 2, "choices[0].wall_time: missing (an array expected)"),
    "missing top field": (_lines({k: v for k, v in WRITING.items() if k != "choices"}), 1, "choices: missing"),
    "wrong type": (_lines(_with(question_id="161")), 1, 'question_id: an integer expected, got a string "161"'),
    "wrong element type": (
        _lines(_with(choices=[{**_choice(1), "new_tokens": ["4"]}])),
        1,
        'choices[0].new_tokens[0]: an integer >= 0 expected, got a string "4"',
    ),
    "choice not an object": (_lines(_with(choices=[[1]])), 1, "choices[0]: a JSON object expected, got an array"),
    "unequal per-turn lists": (
        _lines(_with(choices=[{**_choice(1), "wall_time": [0.5, 0.5]}])),
        1,
        "choices[0].wall_time: 2 entries, expected one per turn (1)",
    ),
    "MT-Bench with one turn": (
        _lines(_record(81, "writing", 1)),
        1,
        "choices[0].turns: 1 turn(s) for question 81 (writing), expected 2",
    ),
    "translation with two turns": (
        _lines(WRITING, _record(161, "translation", 2)),
        2,
        "choices[0].turns: 2 turn(s) for question 161 (translation), expected 1",
    ),
    "category not its question's": (_lines(_record(81, "qa", 1)), 1, "category: 'qa', but question 81 of "),
    "unknown question": (_lines(WRITING, _record(999, "qa", 1)), 2, "question_id: 999 is not a question of "),
    "duplicate question": (
        _lines(WRITING, TRANSLATION, WRITING),
        3,
        "question_id: question 81 again (first on line 1)",
    ),
    "two model ids": (_lines(WRITING, _with(model_id="other")), 2, "model_id: 'other', but line 1 has"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_answer_file_is_refused_in_one_line_naming_file_line_and_field(case, question_file, tmp_path):
    text, line, message = MALFORMED[case]
    path = tmp_path / "answers.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(AnswerFileError) as refused:
        read_answer_file(path, read_questions(question_file))
    assert str(refused.value).startswith(f"{path}:{line}: {message}") and "\n" not in str(refused.value)


def test_an_empty_answer_file_is_refused_and_a_good_one_read_whole(question_file, tmp_path):
    questions = read_questions(question_file)
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(AnswerFileError, match=rf"^{re.escape(str(tmp_path / 'empty.jsonl'))}: no answer records"):
        read_answer_file(tmp_path / "empty.jsonl", questions)
    # A turn's text may hold U+2028 unescaped (JSON allows it; json.dumps(ensure_ascii=False) writes it so):
    # it does not end a line.
    translation = _with(choices=[{**_choice(1), "turns": ["Zeile eins\u2028Zeile zwei"]}])
    (tmp_path / "good.jsonl").write_text(
        json.dumps(translation, ensure_ascii=False) + "\n" + json.dumps(WRITING) + "\n", encoding="utf-8"
    )
    read = read_answer_file(tmp_path / "good.jsonl", questions)
    assert read.model_id == "vicuna-7b-v1.3-pld" and [r["question_id"] for r in read.records] == [81, 161]
    assert read.records[1]["choices"][0]["turns"] == ["Zeile eins\u2028Zeile zwei"]


def _cli(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300)


def test_every_command_that_reads_answer_files_refuses_a_bad_one_in_one_line(question_file, tmp_path):
    good, bad = tmp_path / "vicuna-vanilla.jsonl", tmp_path / "vicuna-pld.jsonl"
    good.write_text(_lines(WRITING, TRANSLATION), encoding="utf-8")
    bad.write_text(_lines(WRITING, _record(161, "translation", 2)), encoding="utf-8")
    expected = f"error: {bad}:2: choices[0].turns: 2 turn(s) for question 161 (translation), expected 1"
    out = tmp_path / "report"
    report = [str(ARCHIVE), "--out", str(out), "--no-html", "--spec-bench-questions", str(question_file)]
    for done in (
        _cli("lade_bench.report", *report, "--spec-bench-answers", str(good), str(bad)),
        _cli("lade_bench.export", "spec-bench-check", "--questions", str(question_file), str(good), str(bad)),
    ):
        assert done.returncode == 2 and done.stdout == ""
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(expected), done.stderr
    assert not out.exists()  # refused before the report loaded the sweep or wrote anything
    # Answer files without the question file they are checked against: one line, too.
    done = _cli("lade_bench.report", str(ARCHIVE), "--out", str(out), "--spec-bench-answers", str(good), str(good))
    assert done.returncode == 2 and done.stderr.strip() == (
        "error: --spec-bench-answers needs --spec-bench-questions FILE, Spec-Bench's question.jsonl "
        "(every answer record is checked against its question)"
    )
    checked = _cli("lade_bench.export", "spec-bench-check", "--questions", str(question_file), str(good))
    assert checked.returncode == 0 and checked.stdout.startswith(f"{good}: vicuna-7b-v1.3-pld, 2 questions")
