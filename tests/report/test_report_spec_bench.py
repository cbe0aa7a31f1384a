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
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text

from lade_bench.conf import PACKAGE_CONF_DIR
from lade_bench.export import AnswerFileError, read_answer_file
from lade_bench.export.__main__ import main as export_main
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


def test_answer_files_round_trip_and_read_as_spec_bench_reads_them(answers, rows, tmp_path):
    names = sorted(p.stem for p in answers.glob("*.jsonl"))
    # AR and lookahead ran in cells of two lookahead settings: one file per setting; the rest one file each.
    assert names == sorted(
        [
            "tiny-llama-ar-n5-w15-g15-pool",
            "tiny-llama-ar-n5-w7-g7",
            "tiny-llama-lookahead-n5-w15-g15-pool",
            "tiny-llama-lookahead-n5-w7-g7",
            "tiny-llama-prompt_lookup",
            "tiny-llama-token_recycling",
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
            assert choice["decoding_steps"] == list(mine["decode_steps"])
            assert choice["wall_time"] == pytest.approx(list(mine["wall_time_s"]), abs=0)
            # Spec-Bench's counts: one accepted length per forward, the prefill's token included.
            assert len(choice["accept_lengths"]) == sum(choice["decoding_steps"])
            assert sum(choice["accept_lengths"]) == sum(choice["new_tokens"])
    # speed.py: the mean over questions of tokens/s, method over baseline, each method against the AR file
    # of its own cells; the same number from the rows directly.
    for method, base in (("lookahead-n5-w15-g15-pool", "ar-n5-w15-g15-pool"), ("prompt_lookup", "ar-n5-w7-g7")):
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
    assert read_answer_file(answers / "tiny-llama-token_recycling.jsonl").model_id == "tiny-llama-token_recycling"
    lines = (answers / "tiny-llama-token_recycling.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    broken["choices"][0]["wall_time"] = broken["choices"][0]["wall_time"] + [1.0]
    (tmp_path / "broken.jsonl").write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n")
    with pytest.raises(AnswerFileError, match=r"broken.jsonl:2: .*one entry per turn"):
        read_answer_file(tmp_path / "broken.jsonl")


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
    assert tr["state_mode"] == "warm" and tr["state_requests_max"] > tr["state_requests_min"] == 0
    assert np.isnan(records.loc[("prompt_lookup", "", "overall")]["state_requests_max"])
    assert records.loc[("prompt_lookup", "", "translation")]["quality"].startswith("BLEU ")
    assert records.loc[("prompt_lookup", "", "math_reasoning")]["quality"].startswith("accuracy ")
    assert "judged by an LLM" in records.loc[("token_recycling", "", "mt_bench")]["quality"]
    assert "no reference answers" in records.loc[("token_recycling", "", "qa")]["quality"]
    width = records.loc[("lookahead", "n5-w7-g7", "overall")]["step_tokens_mean"]
    assert width > records.loc[("prompt_lookup", "", "overall")]["step_tokens_mean"] >= 1.0
    assert (records["matches_ar"] == 1.0).all()


def test_external_answer_files_sit_beside_and_never_enter_a_paired_number(spec_sweep, answers, tmp_path):
    # A Spec-Bench user's files: another model id, another machine's times (twice as slow for the method).
    published = {}
    for ours, theirs, scale in (
        ("ar-n5-w7-g7", "vicuna-7b-v1.3-vanilla", 1.0),
        ("prompt_lookup", "vicuna-7b-v1.3-pld", 2.0),
    ):
        records = _read(answers / f"tiny-llama-{ours}.jsonl")
        for record in records:
            record["model_id"] = theirs
            record["choices"][0]["wall_time"] = [t * scale for t in record["choices"][0]["wall_time"]]
        published[theirs] = tmp_path / f"{theirs}.jsonl"
        published[theirs].write_text("".join(json.dumps(r) + "\n" for r in records))
    files = [published["vicuna-7b-v1.3-vanilla"], published["vicuna-7b-v1.3-pld"]]
    result = build_report(
        spec_sweep, tmp_path / "report", html=False, n_boot=200, min_ci_units=2, spec_bench_answers=files
    )
    sweep = result.sweep
    alone = board_records(sweep)
    together = board_records(sweep, [read_answer_file(f) for f in files])
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
        build_report(spec_sweep, tmp_path / "again", html=False, spec_bench_answers=files[:1])
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
    assert {"bleu", "chrf"} <= set(summary["arms"]["lookahead"]) and "accuracy" not in summary["arms"]["lookahead"]
    console = Console(record=True, width=200)
    console.print(summary_table(summary))
    bleu = summary["arms"]["ar"]["bleu"]
    assert f"BLEU {bleu:.1f} chrF" in console.export_text()
