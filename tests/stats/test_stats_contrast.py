"""One setting's paired effect: two cells' speedups compared on the samples both ran, and which cells pair."""

from __future__ import annotations

import math

import pytest

from lade_bench import stats
from tests.stats.rows import frame, row


def _cell(cell, shape, *, samples=12, ar_scale=1.0, speedup=2.0, compression=2.0, noise=0.0, **identity):
    """Rows of one greedy cell: every sample's lookahead is ``speedup`` x faster than its AR (times ``1 + noise*k``)."""
    built = []
    for sample in range(samples):
        for turn in range(2):
            ar_wall = ar_scale * 4.0 * (1.0 + 0.1 * sample)
            wobble = 1.0 + noise * ((sample * 7 + turn) % 5 - 2)
            tokens = 20 + sample
            for arm, wall, steps in (
                ("ar", ar_wall, tokens),
                ("lookahead", ar_wall / speedup * wobble, round(tokens / compression)),
            ):
                built.append(
                    row(cell, f"s{sample:02d}", arm, turn=turn, shape=shape, wall=wall, tokens=tokens, steps=steps,
                        **identity)
                )  # fmt: skip
    return built


def test_the_contrast_is_the_ratio_of_the_two_cells_speedups_on_the_samples_both_ran(tmp_path):
    before = _cell("w4", (5, 4, 4), speedup=2.0, compression=2.0, noise=0.05)
    after = _cell("w7", (5, 7, 4), speedup=2.5, compression=3.0, noise=0.05, ar_scale=1.3)
    # One unit of the "after" cell failed: its sample leaves both cells' sums, not one.
    after = [r for r in after if not (r["sample_id"] == "s03" and r["turn"] == 1 and r["arm"] == "lookahead")]
    after.append(row("w7", "s03", "lookahead", turn=1, shape=(5, 7, 4), error="RuntimeError: boom"))
    rows = frame(tmp_path, before + after)
    contrast = stats.cell_contrast(rows[rows["cell_id"] == "w4"], rows[rows["cell_id"] == "w7"])
    kept = rows[~((rows["sample_id"] == "s03") & (rows["turn"] == 1))]

    def speedup(cell):
        cell_rows = kept[kept["cell_id"] == cell]
        ar, lade = (cell_rows[cell_rows["arm"] == arm]["wall_time_s"].sum() for arm in ("ar", "lookahead"))
        return ar / lade

    assert contrast.speedup_from == pytest.approx(speedup("w4"))
    assert contrast.speedup_to == pytest.approx(speedup("w7"))
    ratio = contrast.speedup_ratio
    assert ratio.value == pytest.approx(speedup("w7") / speedup("w4"))
    # s03 keeps its turn 0: 12 samples, 23 paired units; AR's 1.3x slower machine in "w7" divided out.
    assert (ratio.n_units, ratio.n_pairs, ratio.note) == (12, 23, "")
    assert ratio.low < ratio.value < ratio.high and 1.1 < ratio.low and ratio.high < 1.4
    comp = contrast.compression_ratio
    assert contrast.compression_to / contrast.compression_from == pytest.approx(comp.value)
    assert 1.4 < comp.value < 1.6 and comp.low <= comp.value <= comp.high


def test_a_machine_that_ran_slower_for_one_cell_does_not_show_as_an_effect(tmp_path):
    rows = frame(tmp_path, _cell("a", (5, 4, 4)) + _cell("b", (5, 7, 4), ar_scale=1.5))
    contrast = stats.cell_contrast(rows[rows["cell_id"] == "a"], rows[rows["cell_id"] == "b"])
    assert contrast.speedup_ratio.value == pytest.approx(1.0)
    assert contrast.speedup_ratio.low == pytest.approx(1.0) and contrast.speedup_ratio.high == pytest.approx(1.0)


def test_few_samples_give_the_point_estimate_and_the_reason(tmp_path):
    rows = frame(tmp_path, _cell("a", (5, 4, 4), samples=4) + _cell("b", (5, 7, 4), samples=4, speedup=3.0))
    ratio = stats.cell_contrast(rows[rows["cell_id"] == "a"], rows[rows["cell_id"] == "b"]).speedup_ratio
    assert ratio.value == pytest.approx(1.5)
    assert math.isnan(ratio.low) and ratio.note == "no interval: 4 samples (< 10)"


def test_only_cells_that_differ_in_one_setting_pair_at_adjacent_levels(tmp_path):
    shapes = {"w1g1": (5, 1, 1), "w4g1": (5, 4, 1), "w7g1": (5, 7, 1), "w4g4": (5, 4, 4), "n4": (4, 4, 4)}
    built = [r for cell, shape in shapes.items() for r in _cell(cell, shape, samples=3)]
    built += _cell("off", (5, 4, 4), samples=3, prompt_as_reference=False)
    built += _cell("two_knobs", (3, 7, 7), samples=3)  # differs from every other cell in two settings
    built += _cell("sampled", (5, 4, 1), samples=3, do_sample=True)  # greedy cells only
    built += _cell("other_sweep", (5, 7, 4), samples=3, sweep="elsewhere")  # one sweep at a time
    rows = frame(tmp_path, built)
    summary = stats.summarize(rows)
    found = stats.knob_contrasts(summary, rows)
    pairs = {
        (r["knob"], r["level_from"], r["level_to"], r["fixed"], r["cell_from"], r["cell_to"])
        for r in found.to_dict("records")
    }
    assert pairs == {
        ("window", 1, 4, "N5 G1 ref. on", "w1g1", "w4g1"),
        ("window", 4, 7, "N5 G1 ref. on", "w4g1", "w7g1"),
        ("guesses", 1, 4, "N5 W4 ref. on", "w4g1", "w4g4"),
        ("ngram", 4, 5, "W4 G4 ref. on", "n4", "w4g4"),
        ("prompt_as_reference", False, True, "N5 W4 G4", "off", "w4g4"),
    }
    assert list(found["knob"]) == ["ngram", "window", "window", "guesses", "prompt_as_reference"]
    assert set(found["n_units"]) == {3} and found["speedup_ratio"].tolist() == pytest.approx([1.0] * 5)

    # A cell timed on another CPU kind (the label the report reads from the manifests) pairs with none:
    # its neighbours W1 and W7 become adjacent.
    labels = {("unit", cell): "cpu A" for cell in (*shapes, "off")} | {("unit", "w4g1"): "cpu B"}
    relabelled = stats.knob_contrasts(summary, rows, cell_labels=labels)
    assert {(r["cell_from"], r["cell_to"]) for r in relabelled.to_dict("records")} == {
        ("w1g1", "w7g1"),
        ("n4", "w4g4"),
        ("off", "w4g4"),
    }
