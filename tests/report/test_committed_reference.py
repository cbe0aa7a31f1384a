"""The committed reference results (paper_figures/) recompute from their committed rows alone.

``scripts/reference_results.sh`` archives each sweep into ``paper_figures/rows/<sweep>/`` and builds
the figures, tables and report from those archives. Here the report is built again from the archives
into a temporary folder: every table must come out byte for byte (``cells_summary.csv`` to 1e-9), the
same figures must exist, the sweeps must be the script's whole plan, every group timed at one clean
commit on one CPU kind, pinned to one core with nothing of the suite beside it, and every number the
README quotes must be one the tables hold.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from lade_bench import stats
from lade_bench.report.build import FIGURES_DIR, TABLES_DIR, build_report
from lade_bench.report.conditions import cell_processor
from lade_bench.results.archive import cell_manifests

from .committed import (
    EMBEDDED_MODELS,
    assert_each_run_timed_alone,
    assert_quotes_only_table_numbers,
    assert_tables_recompute,
    kept_figure,
    numbers_in_tables,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "paper_figures"
SWEEPS = ("main", "prompt_ref", "ablation_wg", "ablation_n", "sampling")
ARCHIVES = [FOLDER / "rows" / sweep for sweep in SWEEPS]
DATASETS = {"mt_bench", "humaneval", "mbpp", "classeval", "gsm8k", "xsum"}
DECLARED = (5, 7, 7)
MAIN_ARMS = {"ar", "lookahead", "prompt_lookup", "jacobi"}
# Per sweep: its cells' (N, W, G, prompt as reference, sampled) and the samples of each cell
# (scripts/reference_results.sh).
PLAN = {
    "prompt_ref": ({(5, 7, 7, False, False), (5, 7, 7, True, False)}, 20),
    "ablation_wg": ({(5, w, g, False, False) for w in (1, 4, 7) for g in (1, 4, 7)}, 10),
    "ablation_n": ({(n, 4, 4, True, False) for n in (2, 3, 4, 5)}, 10),
    "sampling": ({(5, 7, 7, True, False), (5, 7, 7, True, True)}, 20),
}
MAIN_SAMPLES = 20


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """The report built again from the committed archives, into a temporary folder."""
    out = tmp_path_factory.mktemp("reference")
    return build_report(ARCHIVES, out, html=False)


def test_every_committed_table_recomputes_from_the_committed_rows(rebuilt):
    """Markdown and LaTeX tables byte for byte, the full-precision summary to 1e-9, no table missing or extra."""
    assert_tables_recompute(rebuilt.out_dir / TABLES_DIR, FOLDER / TABLES_DIR, key="cell_id")


def test_the_committed_figures_are_the_ones_the_rows_give(rebuilt):
    """The same figures (no stale one from an earlier sweep), none skipped for want of inputs it should have."""
    new = sorted(p.name for p in (rebuilt.out_dir / FIGURES_DIR).iterdir())
    assert new == sorted(p.name for p in (FOLDER / FIGURES_DIR).iterdir())
    assert {"speedup_bars.png", "speedup_heatmap_wg.png", "speedup_compression_vs_n.png"} <= set(new)


def test_the_device_profile_figure_has_one_row_per_key_and_predicts_each_cell_from_its_own_sweep(rebuilt):
    """Five sweeps measured SmolLM2's profile on one CPU kind: one row draws all five, and every
    cell is predicted from the profile its own sweep measured, never from another's."""
    sweep = rebuilt.sweep
    keys = {stored.label() for stored in sweep.profiles}
    assert len(sweep.profiles) > len(keys)  # the case this guards: one key measured in several sweeps
    fig = kept_figure(rebuilt, "device_profile")
    assert len(fig.axes) == 2 * len(keys)
    assert len(sweep.cell_profiles) == sweep.rows[["sweep", "cell_id"]].drop_duplicates().shape[0]
    for (name, _), stored in sweep.cell_profiles.items():
        assert stored.path.parent.parent.name == name, (name, stored.path)


def test_the_sweeps_are_the_whole_plan(rebuilt):
    """Main: 2 models x 6 datasets x (declared, tuned), 20 samples; each ablation and sampling cell as planned."""
    rows = rebuilt.sweep.rows
    assert set(rows["sweep"]) == set(SWEEPS)
    main = rows[rows["sweep"] == "main"]
    assert set(main["model"]) == EMBEDDED_MODELS and set(main["dataset"]) == DATASETS
    for (model, dataset), group in main.groupby(["model", "dataset"]):
        configs = {tuple(c) for c in group[["ngram", "window", "guesses"]].drop_duplicates().itertuples(index=False)}
        assert DECLARED in configs and len(configs) == 2, (model, dataset, configs)
        declared = group[(group["ngram"] == 5) & (group["window"] == 7) & (group["guesses"] == 7)]
        arms = MAIN_ARMS | ({"assisted"} if model == "gemma3-270m" else set())
        assert set(declared["arm"]) == arms, (model, dataset)
        assert set(group.drop(declared.index)["arm"]) == {"ar", "lookahead"}, (model, dataset)
    assert main.groupby("cell_id")["sample_id"].nunique().eq(MAIN_SAMPLES).all()
    for sweep, (configs, samples) in PLAN.items():
        cells = rows[rows["sweep"] == sweep]
        keys = cells[["ngram", "window", "guesses", "prompt_as_reference", "do_sample"]].drop_duplicates()
        assert {tuple(k) for k in keys.itertuples(index=False)} == configs, sweep
        assert cells.groupby("cell_id")["sample_id"].nunique().eq(samples).all(), sweep
    # No arm of any cell lost a unit to an error: every arm is paired with AR on every unit it ran.
    assert all(len(stats.common_rows(cell)) == len(cell) for _, cell in rows.groupby("cell_id"))


# The groups ran at two commits: the SmolLM2 main groups, the ablations and the sampling sweep at the
# commit the regeneration started from, the Gemma main groups (the only ones with the assisted arm)
# after the assisted arm's draft-cache fix. Between them src/ may differ only in these files, none of
# which a SmolLM2 cell runs (the GPU check, and the assisted arm's draft handling). Paths as they were at
# those commits (git diffs the two commits' trees): decoding/assisted.py is decoding/baselines/ now.
SRC_CHANGES_BETWEEN_COMMITS = {
    "src/lade_bench/decoding/assisted.py",
    "src/lade_bench/gpu_check/__main__.py",
    "src/lade_bench/gpu_check/stages.py",
}


def _src_changes(first: str, second: str) -> set[str]:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "diff", "--name-only", first, second, "--", "src"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"git cannot compare {first} and {second} (a shallow clone?): {done.stderr}"
    return set(done.stdout.split())


def test_each_group_ran_at_one_clean_commit_on_one_cpu_kind_pinned_and_alone(rebuilt):
    """One clean commit per group (at most two in all, differing in src/ only where no other group runs);
    one core and one torch thread per run of a cell, no suite process beside it; one CPU kind per group.

    A group is what reference_results.sh times in one sitting: one (model, dataset) of the main
    table, or one whole ablation or sampling sweep.
    """
    manifests = [m for archive in ARCHIVES for m in cell_manifests(archive).values()]
    commits = sorted({m["git_sha"] for m in manifests})
    assert len(commits) <= 2, commits
    if len(commits) == 2:
        assert _src_changes(*commits) <= SRC_CHANGES_BETWEEN_COMMITS, commits
    cells = rebuilt.sweep.rows[["sweep", "model", "dataset", "cell_id"]].drop_duplicates()
    group_of = {
        c.cell_id: (c.sweep, c.model, c.dataset) if c.sweep == "main" else (c.sweep,)
        for c in cells.itertuples(index=False)
    }
    groups: dict[tuple[str, ...], set[str]] = {}
    group_commits: dict[tuple[str, ...], set[str]] = {}
    for m in manifests:
        assert not m["git_dirty"], m["cell_id"]
        assert_each_run_timed_alone(m, cores=1)
        groups.setdefault(group_of[m["cell_id"]], set()).add(cell_processor(m))
        group_commits.setdefault(group_of[m["cell_id"]], set()).add(m["git_sha"])
    assert set(groups) == set(group_of.values())
    assert all(len(cpus) == 1 for cpus in groups.values()), groups
    assert all(len(shas) == 1 for shas in group_commits.values()), group_commits


def test_greedy_arms_give_ar_tokens_on_every_unit(rebuilt):
    """float32 greedy: lookahead, prompt lookup, Jacobi and assisted match AR token for token everywhere."""
    summary = rebuilt.sweep.summary
    greedy = summary[(~summary["do_sample"].astype(bool)) & (summary["arm"] != stats.BASELINE_ARM)]
    assert (greedy["matches_ar"] == 1.0).all(), greedy.loc[greedy["matches_ar"] < 1, ["cell_id", "arm"]]


def test_every_number_the_readmes_quote_is_in_the_tables():
    """Each ``1.23x`` of the prose about the reference results (the results README's and the docs' at a
    glance) is a number of a committed table.

    The tables print ratios without the ``x`` (``0.84 [0.73, 0.98]``); the prose marks them with it.
    """
    known = numbers_in_tables(FOLDER / TABLES_DIR)
    for readme in (FOLDER / "README.md", ROOT / "docs" / "reference_results.md"):
        text = readme.read_text()
        section = re.search(r"<!-- reference -->\n(.*?)<!-- /reference -->", text, re.S)
        assert section is not None, f"{readme}: no <!-- reference --> section"
        assert_quotes_only_table_numbers(section.group(1), known, readme)


def _drawn(fig):
    """``fig`` laid out and drawn, so that every text has its final extent."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


def test_one_panel_figures_name_only_the_model_and_sweep_they_draw(rebuilt):
    """The W x G heatmap, the N figure and the ROUGE figure draw one sweep of SmolLM2 each: their
    headers name that one, not every model and sweep of the report (issue 54)."""
    for figure, name in (
        ("speedup_heatmap_wg", "ablation_wg"),
        ("speedup_compression_vs_n", "ablation_n"),
        ("rouge_parity", "sampling"),
    ):
        header = " ".join(kept_figure(rebuilt, figure)._suptitle.get_text().split())  # type: ignore[union-attr]
        assert "model: smollm2-135m-instruct" in header and f"sweep: {name} " in header, header
        assert "gemma" not in header and "+" not in header, header


def test_the_heatmap_colour_bar_label_fits_the_figure(rebuilt):
    """The colour bar's label lies inside the figure (it was clipped at the right edge)."""
    fig = _drawn(kept_figure(rebuilt, "speedup_heatmap_wg"))
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    labels = [ax.yaxis.label for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert labels and labels[0].get_text()
    box = labels[0].get_window_extent(renderer)
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, (box, page)


def test_the_device_profile_labels_do_not_overprint(rebuilt):
    """Each predicted-vs-measured panel names its methods once each in its legend (n beside each), never a
    row of identical labels, and no two of its texts overlap."""
    fig = _drawn(kept_figure(rebuilt, "device_profile"))
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[1::2]:
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        methods = [label for label in labels if "(n=" in label]
        assert len(methods) >= 2 and len(set(methods)) == len(methods), labels
        boxes = [Text.get_window_extent(t, renderer) for t in ax.texts if t.get_text().strip()]
        overlapping = [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]
        assert not overlapping, ax.get_title()


def test_the_acceptance_histogram_keeps_its_bars_wide_and_its_legends_off_the_bars(rebuilt):
    """No panel's axis is stretched past 30 tokens by a few long assisted rounds, and no legend lies
    over its panel's plotting area."""
    fig = _drawn(kept_figure(rebuilt, "accept_length_histogram"))
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_legend() is not None]
    assert len(panels) == 16  # 6 Gemma headline cells, 10 SmolLM2 ones
    for ax in panels:
        longest = max(int(label.get_text().lstrip(">")) for label in ax.get_xticklabels() if label.get_text())
        assert longest <= 30, (ax.get_title(), longest)
        legend, area = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
        assert legend.y1 <= area.y0, ax.get_title()


def test_the_speedup_bars_show_the_tuned_cells_and_the_cpu_kind_of_each(rebuilt):
    """Beside each main group's declared cell its tuned cell (N5 W2 G7); every tick names its CPU kind,
    since the groups ran on three."""
    fig = kept_figure(rebuilt, "speedup_bars")
    ticks = [label.get_text() for ax in fig.axes for label in ax.get_xticklabels() if label.get_text()]
    main = [t for t in ticks if t.startswith("main\n")]
    assert sum("W=2" in t for t in main) == 12 and sum("W=7" in t for t in main) == 12
    kinds = {t.splitlines()[-1] for t in ticks}
    assert kinds == {"AMD EPYC 25/17/1", "AMD EPYC 26/2/1", "Intel Xeon 6/167/8"}, kinds
