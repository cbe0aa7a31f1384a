"""The committed Spec-Bench reference results (paper_figures/spec_bench/) recompute from their committed rows.

``scripts/spec_bench_reference.sh`` runs both embedded models over Spec-Bench's six category groups (10
questions each, 128 new tokens), archives the sweep into ``paper_figures/spec_bench/rows/spec_bench/`` and
builds the leaderboard and report from that archive alone. Here the report is built again from the
archive into a temporary folder: every table must come out byte for byte (``cells_summary.csv`` to
1e-9), with the same figures; the sweep must be the script's whole plan (per model and group the three
cells of ``+sweep=spec_bench``, every arm on every question); each group timed at one clean commit on
one CPU kind, pinned to one core with nothing of the suite beside it; every greedy arm equal to AR; and
every number the prose quotes one the tables hold, and the conditions its README states (cells, rows,
load, time span, resumed cells) those the manifests record.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg

from lade_bench import stats
from lade_bench.datasets.spec_bench import GROUPS
from lade_bench.export import answer_records
from lade_bench.export.spec_bench_speed import speed_py
from lade_bench.methods import get_method, method_label
from lade_bench.methods.registry import configuration_label
from lade_bench.report.build import FIGURES_DIR, TABLES_DIR, build_report
from lade_bench.report.conditions import PROCESSOR_MIXED, PROCESSOR_UNRECORDED, cell_processor
from lade_bench.report.spec_bench_board import FIGURE, SOURCE_SWEEP, entry_label, group_of_sample
from lade_bench.results import load_rows
from lade_bench.results.archive import cell_manifests

from .committed import (
    EMBEDDED_MODELS,
    QUOTED_DECIMAL,
    SPEC_BENCH_SECTION,
    assert_each_run_timed_alone,
    assert_quotes_only_table_numbers,
    assert_tables_recompute,
    kept_figure,
    markdown_rows,
    numbers_in_tables,
    spec_bench_cell_arms,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "paper_figures" / "spec_bench"
ARCHIVE = FOLDER / "rows" / "spec_bench"
SAMPLES = 10  # dataset.per_category_limit=10: ten questions per group (MT-Bench: both turns of each)
# The three cells of a (model, group), told apart by their arms, as their configs declare them.
CELL_ARMS = [frozenset(arms) for arms in spec_bench_cell_arms(ROOT).values()]
# Lookahead's settings: Spec-Bench's own N5 W7 G7 without the pool, the paper's 7B preset with it.
LOOKAHEAD_SETTINGS = {(5, 7, 7, False), (5, 15, 15, True)}
# Spec-Bench's own evaluation/speed.py run on the committed rows' answer files (scripts/record_spec_bench_speed_py.py).
SPEED_PY_FIXTURE = ROOT / "tests" / "fixtures" / "spec_bench_speed_py.json"
# The README's section sizing speed.py's verdicts against ours.
SPEED_PY_SECTION = (r"<!-- speed_py -->", r"<!-- /speed_py -->")
# How the README spells a small count at a sentence's start.
NUMBER_WORDS = {0: "No", 1: "One", 2: "Two", 3: "Three", 4: "Four", 5: "Five"}


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """The report built again from the committed archive, into a temporary folder."""
    out = tmp_path_factory.mktemp("spec_bench")
    return build_report([ARCHIVE], out, html=False)


def test_every_committed_table_recomputes_from_the_committed_rows(rebuilt):
    """The leaderboard and every other table byte for byte, the full-precision summary to 1e-9."""
    assert_tables_recompute(rebuilt.out_dir / TABLES_DIR, FOLDER / TABLES_DIR, key="cell_id")


def test_the_main_and_ablation_tables_name_each_cells_spec_bench_group():
    """Issue 63: main_speedup and ablation_wg showed one cell per model labelled "spec_bench" (Gemma's math
    cell, SmolLM2's RAG cell, as if they were the benchmark). Each row names the group its cell ran, and the
    main table has every group of each model, once."""
    groups = {f"spec_bench: {group}" for group in GROUPS}
    for name in ("main_speedup", "ablation_wg"):
        table = markdown_rows(FOLDER / TABLES_DIR / f"{name}.md")
        for model in ("gemma3-270m", "smollm2-135m-instruct"):
            shown = {row["Dataset"] for row in table if row["Model"] == model}
            assert shown == groups, (name, model, shown)
    main = markdown_rows(FOLDER / TABLES_DIR / "main_speedup.md")
    ar_rows = [(row["Model"], row["Dataset"]) for row in main if row["Method"] == "AR"]
    assert len(ar_rows) == len(set(ar_rows)) == 2 * len(GROUPS)


def test_the_committed_figures_are_the_ones_the_rows_give(rebuilt):
    """The same figures, the leaderboard's among them."""
    new = sorted(p.name for p in (rebuilt.out_dir / FIGURES_DIR).iterdir())
    assert new == sorted(p.name for p in (FOLDER / FIGURES_DIR).iterdir())
    assert f"{FIGURE}.png" in new


def test_the_roofline_table_is_the_step_cost_model_on_the_committed_rows(rebuilt):
    """roofline.csv recomputed from the committed rows and profiles is the committed one, and a record's
    predicted speedup is stats.step_cost.predicted_speedup of its cell's paired rows on the cell's own
    committed profile (Gemma SuffixDecoding on math; issue 67)."""
    from lade_bench.report.roofline import NAME
    from lade_bench.stats.step_cost import predicted_speedup

    committed = FOLDER / TABLES_DIR / f"{NAME}.csv"
    assert (rebuilt.out_dir / TABLES_DIR / f"{NAME}.csv").read_text() == committed.read_text()
    table = pd.read_csv(committed, keep_default_na=False, dtype={"setting": str})
    record = table[
        (table["model"] == "gemma3-270m") & (table["arm"] == "suffix_decoding") & (table["group"] == "math_reasoning")
    ].iloc[0]
    rows = rebuilt.sweep.rows
    rows = rows[(rows["model"] == "gemma3-270m") & (rows["sample_id"].map(group_of_sample) == "math_reasoning")]
    (cell_id,) = set(rows.loc[rows["arm"] == "suffix_decoding", "cell_id"])
    paired = stats.common_rows(rows[rows["cell_id"] == cell_id]).sort_values(["sample_id", "turn"])
    profile = rebuilt.sweep.cell_profiles[("spec_bench", cell_id)].profile
    expected = predicted_speedup(paired[paired["arm"] == "suffix_decoding"], paired[paired["arm"] == "ar"], profile)
    assert record["predicted_speedup"] == pytest.approx(expected, rel=1e-12)
    assert record["predicted_speedup"] == pytest.approx(record["accepted_per_step"] / record["relative_step_cost"])


def test_the_roofline_figure_is_drawn_from_the_committed_table(rebuilt, tmp_path):
    """The committed roofline.png is what draw_roofline gives from the committed roofline.csv, byte for
    byte, and the report built from the rows lists it."""
    import pandas as pd

    from lade_bench.report.figures import save_figure
    from lade_bench.report.roofline import NAME, draw_roofline

    records = pd.read_csv(FOLDER / TABLES_DIR / f"{NAME}.csv", keep_default_na=False, dtype={"setting": str})
    context = rebuilt.sweep.context_line(rebuilt.sweep.rows)
    png, _ = save_figure(draw_roofline(records, context), tmp_path, NAME)
    assert png.read_bytes() == (FOLDER / FIGURES_DIR / f"{NAME}.png").read_bytes()
    assert NAME in {figure.name for figure in rebuilt.figures}


def test_the_sweep_is_the_whole_plan(rebuilt):
    """Per model and group: the every-method cell, the paper-setting lookahead cell and the REST cell,
    ten questions each, every arm on every question, paired with its own cell's AR on all of them."""
    rows = rebuilt.sweep.rows
    assert set(rows["model"]) == EMBEDDED_MODELS and set(rows["dataset"]) == {"spec_bench"}
    rows = rows.assign(group=rows["sample_id"].map(group_of_sample))
    found: dict[tuple[str, str], list[frozenset[str]]] = {}
    for _, cell in rows.groupby("cell_id"):
        groups = set(cell["group"])
        assert len(groups) == 1, (cell["cell_id"].iloc[0], groups)
        found.setdefault((cell["model"].iloc[0], groups.pop()), []).append(frozenset(cell["arm"]))
        assert cell["sample_id"].nunique() == SAMPLES, cell["cell_id"].iloc[0]
        # No arm lost a unit to an error: every arm is paired with AR on every unit it ran.
        assert len(stats.common_rows(cell)) == len(cell), cell["cell_id"].iloc[0]
    assert set(found) == {(model, group) for model in EMBEDDED_MODELS for group in GROUPS}
    assert all(sorted(arms, key=sorted) == sorted(CELL_ARMS, key=sorted) for arms in found.values()), found
    lookahead = rows[rows["arm"] == "lookahead"]
    keys = lookahead[["ngram", "window", "guesses", "prompt_as_reference"]].drop_duplicates()
    assert {tuple(k) for k in keys.itertuples(index=False)} == LOOKAHEAD_SETTINGS


def test_each_group_ran_at_one_clean_commit_on_one_cpu_kind_pinned_and_alone(rebuilt):
    """One clean commit for the whole sweep; one core and one torch thread per run of a cell, no suite
    process beside it; one CPU kind per (model, group), the unit one sitting timed."""
    manifests = list(cell_manifests(ARCHIVE).values())
    assert len({m["git_sha"] for m in manifests}) == 1
    cells = rebuilt.sweep.rows[["model", "sample_id", "cell_id"]].drop_duplicates("cell_id")
    group_of = {c.cell_id: (c.model, group_of_sample(c.sample_id)) for c in cells.itertuples(index=False)}
    processors: dict[tuple[str, str], set[str]] = {}
    for m in manifests:
        assert not m["git_dirty"], m["cell_id"]
        assert_each_run_timed_alone(m, cores=1)
        processors.setdefault(group_of[m["cell_id"]], set()).add(cell_processor(m))
    assert set(processors) == set(group_of.values())
    for group, cpus in processors.items():
        assert len(cpus) == 1 and not cpus & {PROCESSOR_MIXED, PROCESSOR_UNRECORDED}, (group, cpus)


def test_greedy_arms_give_ar_tokens_on_every_question(rebuilt):
    """float32 greedy: every method matches AR token for token on every question of every group."""
    summary = rebuilt.sweep.summary
    methods = summary[summary["arm"] != stats.BASELINE_ARM]
    assert (methods["matches_ar"] == 1.0).all(), methods.loc[methods["matches_ar"] < 1, ["cell_id", "arm"]]


def test_the_leaderboard_labels_rest_static_and_only_learning_states_warm(rebuilt):
    """REST's datastore is carried across a cell's requests but none changes it: "static", never "warm
    0-19"; the methods whose state learns say warm and the earlier requests it had seen; the others nothing."""
    lines = (rebuilt.out_dir / TABLES_DIR / "spec_bench_leaderboard.md").read_text().splitlines()
    table = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    header, body = table[0], table[2:]
    method, state = header.index("Method"), header.index("State")
    states: dict[str, set[str]] = {}
    for row in body:
        states.setdefault(row[method].split(" (")[0], set()).add(re.sub(r"\d+-\d+", "N-M", row[state]))
    assert states["REST"] == {"static"}
    for learning in ("Token Recycling", "SuffixDecoding", "PIA", "SAM-Decoding"):
        # Per cell: the committed cells ran one group each, before method_state.scope (issue 65) existed.
        assert states[learning] == {"warm per cell N-M"}, learning
    assert states["Lookahead"] == states["Prompt lookup"] == {""}


def test_every_number_the_prose_quotes_is_in_the_tables():
    """Each decimal of the results prose (the results README's and docs/reference_results.md's Spec-Bench sections) is a
    number a committed table prints (the tables print ratios without the ``x`` the prose adds)."""
    known = numbers_in_tables(FOLDER / TABLES_DIR, number=r"\d+\.\d+")
    for readme in (FOLDER / "README.md", ROOT / "docs" / "reference_results.md"):
        section = re.search("(.*?)".join(SPEC_BENCH_SECTION), readme.read_text(), re.S)
        assert section is not None, f"{readme}: no <!-- spec_bench --> section"
        prose = re.sub(r"<!--.*?-->", "", section.group(1), flags=re.S)
        assert_quotes_only_table_numbers(prose, known, readme, quoted=QUOTED_DECIMAL)


def test_the_conditions_the_readme_states_are_the_manifests():
    """The results README's cell and row counts, 1-minute load range, time span and count of resumed cells
    are what the committed manifests and rows record (every run of a cell: its ``previous_runs``, then itself)."""
    manifests = list(cell_manifests(ARCHIVE).values())
    runs = [run for m in manifests for run in [*(m.get("previous_runs") or []), m]]
    snapshots = [s for run in runs for s in (run["timing_conditions"].get(k) for k in ("start", "end")) if s]
    loads = [s["load_average"][0] for s in snapshots]
    times = sorted(s["utc"][:16].replace("T", " ") for s in snapshots)
    n_rows = len(load_rows(ARCHIVE))
    resumed = sum(bool(m.get("previous_runs")) for m in manifests)
    text = " ".join((FOLDER / "README.md").read_text().split())
    for stated in (
        f"{len(manifests)} cells, {n_rows:,} per-sample rows",
        f"was {min(loads):.2f}-{max(loads):.2f}",
        f"{times[0]} UTC to {times[-1]} UTC",
        f"{NUMBER_WORDS[resumed]} cells were stopped and resumed",
    ):
        assert stated in text, stated


def _answer_file(names, rec: dict) -> str:
    """The answer file (``<model>-<arm>[-<shape>]-<cell id>``) of a leaderboard entry, among ``names``."""
    prefix = "-".join(part for part in (rec["model"], rec["arm"], rec["setting"]) if part)
    (name,) = [n for n in names if re.fullmatch(rf"{re.escape(prefix)}-[0-9a-f]{{16}}", n)]
    return name


def test_the_leaderboards_speed_py_columns_are_spec_bench_s_own_speed_py(rebuilt):
    """Beside each of our entries, per group and overall, the leaderboard's speed.py speedup and tau are what
    Spec-Bench's own evaluation/speed.py (run unchanged, with the model's tokenizer) gives on the answer
    files of the same rows (issue 65: Spec-Bench's arithmetic beside ours)."""
    fixture = json.loads(SPEED_PY_FIXTURE.read_text())
    rows_sha = hashlib.sha256((ARCHIVE / "rows.parquet").read_bytes()).hexdigest()
    assert fixture["rows_sha256"] == rows_sha, "new rows: re-record with scripts/record_spec_bench_speed_py.py"
    ours = rebuilt.board[rebuilt.board["source"] == SOURCE_SWEEP]
    assert len(ours) == len(fixture["results"]) * (len(GROUPS) + 1)
    seen = set()
    for rec in ours.to_dict("records"):
        name = _answer_file(fixture["results"], rec)
        theirs = fixture["results"][name]["tasks"][rec["column"]]
        assert rec["speedpy_speedup"] == pytest.approx(theirs["speedup"], rel=1e-9), (name, rec["column"])
        assert rec["speedpy_tau"] == pytest.approx(theirs["tau"], rel=1e-9), (name, rec["column"])
        seen.add(name)
    assert seen == set(fixture["results"])
    header = (rebuilt.out_dir / TABLES_DIR / "spec_bench_leaderboard.md").read_text().split("\n| Model |")[1]
    assert "| speed.py |" in header.splitlines()[0] and "| speed.py tau |" in header.splitlines()[0]


def test_every_method_row_names_the_configuration_its_cells_recorded(rebuilt):
    """Each entry of the leaderboard, and each legend of the report's figures, says which configuration ran:
    ``configuration_label`` of the method's section as the cell's config recorded it (issue 65); the
    committed cells ran SAM-Decoding with its Token Recycling tree and no static corpus."""
    sweep = rebuilt.sweep
    ours = rebuilt.board[rebuilt.board["source"] == SOURCE_SWEEP]
    labels = set()
    for key, cell in sweep.rows.groupby(["sweep", "cell_id"]):
        config = yaml.safe_load(next(c.config_text for c in sweep.cells if (c.sweep, c.cell_id) == key))
        for arm in set(cell["arm"]) - {stats.BASELINE_ARM}:
            label = configuration_label(arm, config[get_method(arm).own_section])
            entries = ours[(ours["model"] == cell["model"].iloc[0]) & (ours["arm"] == arm)]
            assert set(entries["label"]) == {label}, (key, arm)
            labels.add(label)
    assert "SAM-Decoding (Token Recycling tree)" in labels
    assert any(
        label != method_label(arm) for arm in set(ours["arm"]) for label in set(ours[ours["arm"] == arm]["label"])
    )
    board = (rebuilt.out_dir / TABLES_DIR / "spec_bench_leaderboard.md").read_text()
    assert "| SAM-Decoding (Token Recycling tree) |" in board
    for name in ("speedup_bars", "accept_length_histogram"):
        figure = kept_figure(rebuilt, name)
        legends = figure.legends + [ax.get_legend() for ax in figure.axes if ax.get_legend()]
        texts = {t.get_text().split(":")[0].split("\n")[0] for legend in legends for t in legend.get_texts()}
        assert "SAM-Decoding (Token Recycling tree)" in texts, (name, texts)
        # The longer labels still fit: every legend entry inside the figure as saved.
        FigureCanvasAgg(figure)
        figure.draw_without_rendering()
        renderer, bounds = figure.canvas.get_renderer(), figure.bbox
        for text in (t for legend in legends for t in legend.get_texts()):
            box = text.get_window_extent(renderer)
            assert bounds.x0 <= box.x0 and box.x1 <= bounds.x1, (name, text.get_text())


def _sizing_rows(rebuilt) -> list[str]:
    """The README's sizing table as the committed rows give it: per (model, entry) overall, our speedup,
    speed.py's, their ratio and its two factors (speed.py's mean of per-question rates on the recorded AR
    tokens over ours: the weighting; speed.py over that: AR's tokens re-counted), our tau and speed.py's."""
    sets = {answer_set.model_id: answer_set for answer_set in answer_records(rebuilt.sweep.rows)}
    board = rebuilt.board
    shown = []
    for rec in board[(board["source"] == SOURCE_SWEEP) & (board["column"] == "overall")].to_dict("records"):
        name = _answer_file(sets, rec)
        recorded = speed_py(sets[name].records, sets[f"{rec['model']}-ar-{name[-16:]}"].records).speedup
        ours, theirs = rec["speedup"], rec["speedpy_speedup"]
        shown.append(
            f"| {rec['model']} | {entry_label(rec)} | {ours:.2f}x | {theirs:.2f}x | {theirs / ours:.3f} | "
            f"{recorded / ours:.3f} | {theirs / recorded:.3f} | {rec['mean_accepted']:.2f} | {rec['speedpy_tau']:.2f} |"
        )
    return shown


def test_the_readme_sizes_speed_py_against_ours_with_the_committed_rows(rebuilt):
    """The results README's speed.py section: its table is the committed rows' (every entry, each ratio and
    factor), and its prose quotes only numbers of that table."""
    text = (FOLDER / "README.md").read_text()
    section = re.search("(.*?)".join(SPEED_PY_SECTION), text, re.S)
    assert section is not None, "README.md: no <!-- speed_py --> section"
    table = [line for line in section.group(1).splitlines() if re.match(r"\| [a-z]", line)]
    expected = _sizing_rows(rebuilt)
    assert table == expected
    prose = re.sub(
        r"<!--.*?-->",
        "",
        "\n".join(line for line in section.group(1).splitlines() if not line.startswith("|")),
        flags=re.S,
    )
    known = {n for row in expected for n in re.findall(r"\d+\.\d+", row)}
    assert_quotes_only_table_numbers(prose, known, "README.md speed_py section", quoted=QUOTED_DECIMAL)


def test_smollm2s_translation_wins_say_the_outputs_copy_the_german_source(shared_data_dir):
    """Issue 63: SmolLM2's translation "wins" were stated without saying its outputs copy the untranslated
    German source. The README's count of AR outputs sharing a four-word run with their source sentence is
    the committed rows' (the outputs) against Spec-Bench's question file (the sources)."""
    questions = {}
    for line in (shared_data_dir / "spec_bench" / "question.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        questions[int(record["question_id"])] = record["turns"][0]
    rows = load_rows(ARCHIVE)
    ar = rows[
        (rows["arm"] == "ar")
        & (rows["model"] == "smollm2-135m-instruct")
        & rows["sample_id"].str.startswith("translation-")
    ].drop_duplicates("sample_id")

    def runs(text: str) -> set[tuple[str, ...]]:
        words = text.split()
        return {tuple(words[i : i + 4]) for i in range(len(words) - 3)}

    copying = sum(
        bool(runs(str(r["output_text"])) & runs(questions[int(str(r["sample_id"]).rpartition("-")[2])]))
        for r in ar.to_dict("records")
    )
    text = " ".join((FOLDER / "README.md").read_text().split())
    assert (
        f"{copying} of SmolLM2's {len(ar)} AR translation outputs repeat at least one four-word run of the German "
        "source sentence" in text
    )
