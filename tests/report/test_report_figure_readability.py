"""Figures a reader can use: panels that carry information, contrast, no overprinting, n stated, paired intervals.

Drawn from the small real sweep (``conftest.py``), copied under other model and sweep names where a
property needs several models, with speedups set exactly where a property needs known colours.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.text import Text

from lade_bench import stats
from lade_bench.report.figures import FIGURES, FigureSkipped, draw_speedup_bars
from lade_bench.report.sweep import Sweep, sweep_from_rows
from lade_bench.report.text_health import FIGURE as TEXT_HEALTH_FIGURE
from lade_bench.report.text_health import accepted_vs_repetition

from .sweep_builder import MODEL_NAME, as_model, with_speedups

# Long names, so that the figures of two models (and two sweeps) also show that long titles fit.
OTHER = "a-long-model-name-instruct-v2-with-a-suffix"
SECOND_SWEEP = "an_ablation_sweep_with_a_long_name"
# Lowered so that the 2-3 samples of the test cells get intervals (error bars to place labels over).
WITH_CI = stats.IntervalSettings(n_boot=200, min_units=2)
# The figures the single-device sweep draws (the multi-device one has its own test), the report's text-health
# figure (drawn outside the registry, by report.text_health) included.
DRAWERS = {name: spec.draw for name, spec in FIGURES.items() if name != "speedup_vs_devices"}
DRAWERS[TEXT_HEALTH_FIGURE] = accepted_vs_repetition
DRAWN = list(DRAWERS)


def _sweep(base: Sweep, rows: pd.DataFrame, intervals: stats.IntervalSettings = WITH_CI) -> Sweep:
    return sweep_from_rows(rows, roots=base.roots, cells=base.cells, profiles=base.profiles, intervals=intervals)


@pytest.fixture(scope="module")
def two_models(sweep) -> Sweep:
    """The sweep plus a copy of it as another model, that copy also once more under another sweep name
    (both names long)."""
    rows = pd.concat(
        [sweep.rows, as_model(sweep.rows, OTHER), as_model(sweep.rows, OTHER, sweep=SECOND_SWEEP)],
        ignore_index=True,
    )
    return _sweep(sweep, rows)


def _drawn(fig: Figure) -> Figure:
    """``fig`` laid out as when it is saved (constrained layout run, text placed), without rasterizing it:
    the positions and extents the tests read are those of a full draw."""
    FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    return fig


def _texts(fig: Figure) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _overlaps(texts: list[Text], fig: Figure) -> list[tuple[str, str]]:
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    return [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]


def _heatmaps(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.images]


def test_heatmap_draws_one_panel_per_model_and_dataset_with_a_grid(two_models):
    fig = FIGURES["speedup_heatmap_wg"].draw(two_models)
    panels = _heatmaps(fig)
    titles = [ax.get_title() for ax in panels]
    # The N=3 W x G grid of toy_sum, for each (model, sweep); N=4, the prompt-ref-off cell and toy_code
    # are single cells (1 x 1) and draw nothing.
    assert len(panels) == 3
    for title in titles:
        assert "toy_sum" in title and "N=3" in title and "prompt ref on" in title and "n=3" in title
        assert (MODEL_NAME in title) != (OTHER in title)  # exactly one model per panel
    assert sorted((OTHER in t, SECOND_SWEEP in t) for t in titles) == [(False, False), (True, False), (True, True)]
    assert all(ax.images[0].get_array().shape == (2, 2) for ax in panels)


def test_heatmap_without_any_grid_is_skipped_with_a_reason(sweep):
    single = _sweep(sweep, sweep.rows[(sweep.rows["window"] == 3) & (sweep.rows["guesses"] == 3)])
    with pytest.raises(FigureSkipped, match="two or more values of both W and G"):
        FIGURES["speedup_heatmap_wg"].draw(single)
    # A strip (W 1 and 3 at G=3 only) is one comparison: the contrast table's, not a heatmap's.
    strip = _sweep(sweep, sweep.rows[sweep.rows["guesses"] == 3])
    with pytest.raises(FigureSkipped, match="strips are not drawn"):
        FIGURES["speedup_heatmap_wg"].draw(strip)


def test_heatmap_keeps_a_prompt_ref_off_grid_apart(sweep):
    # The paper's W x G ablation runs with prompt-as-reference off; such a grid gets its own panel.
    grid = sweep.rows[(sweep.rows["ngram"] == 3) & sweep.rows["prompt_as_reference"].astype(bool)]
    off = grid.assign(prompt_as_reference=False, cell_id=grid["cell_id"] + "-off")
    fig = FIGURES["speedup_heatmap_wg"].draw(_sweep(sweep, pd.concat([sweep.rows, off], ignore_index=True)))
    titles = [ax.get_title() for ax in _heatmaps(fig)]
    assert len(titles) == 2 and sum("prompt ref off" in t for t in titles) == 1


def test_heatmap_text_contrasts_with_its_cell(sweep):
    speedups = {(3, 1, 1): 0.3, (3, 1, 3): 1.0, (3, 3, 1): 4.0, (3, 3, 3): 1.1}
    fig = _drawn(FIGURES["speedup_heatmap_wg"].draw(_sweep(sweep, with_speedups(sweep.rows, speedups))))
    (ax,) = _heatmaps(fig)
    colours = {text.get_text(): to_rgba(text.get_color()) for text in ax.texts}
    white, black = to_rgba("white"), to_rgba("black")
    # Dark red (0.3x) and dark blue (4x) cells: white text; the near-white cells at parity: black.
    assert colours == {"0.30": white, "4.00": white, "1.00": black, "1.10": black}
    # A diverging map centred at 1.0: parity is the map's middle colour.
    image = ax.images[0]
    assert image.norm(1.0) == pytest.approx(0.5)
    assert not _overlaps(list(ax.texts), fig)


@pytest.mark.slow
def test_no_two_texts_overlap_and_titles_fit_the_figure(sweep, two_models):
    # One model (one-panel figures, the narrowest titles), and two models under long model and sweep names.
    for source in (sweep, two_models):
        for name in DRAWN:
            fig = _drawn(DRAWERS[name](source))
            bounds = fig.bbox
            titles = [fig._suptitle, *(ax.title for ax in fig.axes if ax.get_visible())]
            titles = [t for t in titles if t is not None and t.get_text()]
            renderer = fig.canvas.get_renderer()
            for title in titles:
                box = title.get_window_extent(renderer)
                inside = box.x0 >= bounds.x0 and box.x1 <= bounds.x1 and box.y0 >= bounds.y0 and box.y1 <= bounds.y1
                assert inside, (name, title.get_text())
            assert not _overlaps(titles, fig), name
            for ax in fig.axes:
                assert not _overlaps([t for t in ax.texts if t.get_text().strip()], fig), (name, ax.get_title())


def test_every_legend_lies_inside_its_figure(sweep, two_models):
    """Issue 63: the Spec-Bench speedup bars' legend ran past the figure's lower edge and was cut; a
    legend's every edge lies within the figure as saved."""
    for source in (sweep, two_models):
        for name in DRAWN:
            fig = _drawn(DRAWERS[name](source))
            renderer, bounds = fig.canvas.get_renderer(), fig.bbox
            for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]:
                # Within a pixel: the layout places text at sub-pixel positions.
                box = legend.get_window_extent(renderer)
                inside = (
                    bounds.x0 - 1 <= box.x0
                    and box.x1 <= bounds.x1 + 1
                    and bounds.y0 - 1 <= box.y0
                    and box.y1 <= bounds.y1 + 1
                )
                assert inside, (name, box, bounds)


def test_every_figure_states_n(sweep, two_models):
    for source in (sweep, two_models):
        for name in DRAWN:
            texts = [t.get_text() for t in _texts(DRAWERS[name](source))]
            assert any("n=" in t for t in texts), name


def _error_bar_tops(ax) -> dict[float, float]:
    tops = {}
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            for segment in container.lines[2][0].get_segments():
                tops[round(float(segment[0][0]), 6)] = float(max(segment[:, 1]))
    return tops


def test_bar_values_sit_above_their_error_bars(two_models):
    fig = _drawn(FIGURES["speedup_bars"].draw(two_models))
    renderer = fig.canvas.get_renderer()
    checked = 0
    for ax in fig.axes:
        tops = _error_bar_tops(ax)
        for label in ax.texts:
            x = round(float(label.xy[0]), 6)
            if x in tops:
                cap = ax.transData.transform((x, tops[x]))[1]
                assert label.get_window_extent(renderer).y0 >= cap, label.get_text()
                checked += 1
    assert checked >= 8  # every non-AR bar of both models has an interval here


def test_bars_put_one_model_per_row(two_models):
    fig = FIGURES["speedup_bars"].draw(two_models)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles == [OTHER, MODEL_NAME]
    ticks = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert ticks and all("n=" in t for t in ticks) and not any(SECOND_SWEEP in t for t in ticks)


def test_bars_wrap_a_model_with_many_groups_on_one_scale(sweep):
    from lade_bench.report.figures import BAR_SLOTS_PER_ROW

    one_cell = sweep.headline[sweep.headline["cell_id"] == sweep.headline["cell_id"].iloc[0]]
    per_group = len(one_cell)
    count = BAR_SLOTS_PER_ROW // per_group + 2  # more than one row's worth of groups
    copies = [one_cell.assign(dataset=f"data{i}") for i in range(count)]
    other = one_cell.assign(model=OTHER)
    fig = draw_speedup_bars(pd.concat([*copies, other], ignore_index=True), "title", "context")
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles == [OTHER, MODEL_NAME, f"{MODEL_NAME} (continued)"]
    ticks = [t.get_text().split("\n")[0] for ax in fig.axes[1:] for t in ax.get_xticklabels()]
    assert ticks == [f"data{i}" for i in range(count)]
    assert fig.get_size_inches()[0] < 20
    assert len({ax.get_ylim() for ax in fig.axes}) == 1 and len({ax.get_xlim() for ax in fig.axes}) == 1


def test_histogram_keeps_models_and_cells_apart(two_models):
    fig = FIGURES["accept_length_histogram"].draw(two_models)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(two_models.headline_choice)  # one per reported (headline) cell
    compression = two_models.headline.set_index(["model", "sweep", "dataset", "arm"])["compression_ratio"]
    for ax in panels:
        title = ax.get_title()
        assert (MODEL_NAME in title) != (OTHER in title) and "n=" in title
        model = OTHER if OTHER in title else MODEL_NAME
        sweep_name = SECOND_SWEEP if SECOND_SWEEP in title else "unit_report"
        dataset = "toy_code" if "toy_code" in title else "toy_sum"
        legend = ax.get_legend()
        assert "N=" in legend.get_title().get_text() and dataset in legend.get_title().get_text()
        for entry in legend.get_texts():
            text = entry.get_text()
            arm = "lookahead" if text.startswith("Lookahead") else "prompt_lookup"
            mean = float(text.split("mean ")[1].split(",")[0])
            # The legend's mean is the cell's reported compression ratio (not a pool of cells).
            assert mean == pytest.approx(compression[(model, sweep_name, dataset, arm)], abs=0.005)
            assert "n=" in text


def _known_rouge(sweep) -> tuple[Sweep, pd.DataFrame]:
    """The sampling cell with ROUGE set per sample: lookahead minus AR is +5, 0 and +10 points."""
    rows = sweep.rows[sweep.rows["do_sample"].astype(bool)].copy()
    scores = {"ar": {"s0": 0.10, "s1": 0.20, "s2": 0.30}, "lookahead": {"s0": 0.15, "s1": 0.20, "s2": 0.40}}
    for arm, by_sample in scores.items():
        for sample, value in by_sample.items():
            at = (rows["arm"] == arm) & (rows["sample_id"] == sample)
            rows.loc[at, ["rouge1", "rouge2", "rougeL"]] = [value, value / 2, value]
    return _sweep(sweep, rows), rows


def test_rouge_interval_is_the_paired_difference_from_stats(sweep):
    known, rows = _known_rouge(sweep)
    assert "paired" in FIGURES["rouge_parity"].caption
    fig = FIGURES["rouge_parity"].draw(known)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert "n=3 paired samples" in ax.get_title()
    paired = stats.common_rows(rows)
    ticks = [t.get_text().split("\n")[0] for t in ax.get_xticklabels()]
    ((x_points, y_points),) = [line.get_data() for line in ax.lines if line.get_marker() == "o"]
    (container,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    segments = container.lines[2][0].get_segments()
    for metric, tick in (("rouge1", "ROUGE-1"), ("rouge2", "ROUGE-2"), ("rougeL", "ROUGE-L")):
        expected = stats.quality_delta(paired, "lookahead", metric, intervals=WITH_CI)
        at = ticks.index(tick)
        assert y_points[at] == pytest.approx(100 * expected.value)
        low, high = sorted(segments[at][:, 1])
        assert (low, high) == pytest.approx((100 * expected.low, 100 * expected.high))
    assert y_points[ticks.index("ROUGE-L")] == pytest.approx(5.0)
    assert np.isfinite(segments[0][:, 1]).all()


def test_bars_say_how_warm_a_stateful_arm_ran(sweep):
    one_cell = sweep.headline[sweep.headline["cell_id"] == sweep.headline["cell_id"].iloc[0]].copy()
    stateful = one_cell["arm"] == one_cell["arm"].iloc[-1]
    one_cell["state_requests_min"] = np.where(stateful, 0.0, np.nan)
    one_cell["state_requests_max"] = np.where(stateful, 39.0, np.nan)
    fig = draw_speedup_bars(one_cell, "title", "context")
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert sum("(state saw 0-39 earlier requests)" in label for label in labels) == 1
    assert len(labels) == one_cell["arm"].nunique()


def test_no_legend_hides_a_point_of_the_repetition_figure(two_models):
    """Issue 63: each panel's legend sat over the points in its upper left corner (3 of the committed
    Spec-Bench points). Every point of every panel lies outside every legend, and the axis says what it
    measures."""
    fig = _drawn(accepted_vs_repetition(two_models))
    renderer = fig.canvas.get_renderer()
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    boxes = [legend.get_window_extent(renderer) for legend in legends]
    assert boxes, "the figure says which marker is a loop"
    points = 0
    for ax in (ax for ax in fig.axes if ax.get_visible()):
        assert ax.get_xlabel() == "share of its 4-grams that repeat an earlier one"
        for collection in ax.collections:
            for x, y in ax.transData.transform(collection.get_offsets()):
                points += 1
                assert not any(box.contains(x, y) for box in boxes), (ax.get_title(), x, y)
                assert ax.bbox.y0 < y < ax.bbox.y1, (ax.get_title(), "a point on the frame")
    assert points
