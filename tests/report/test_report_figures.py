"""Figures: all but the multi-device one drawn from the small sweep; skipped with a reason when inputs are absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from lade_bench import stats
from lade_bench.report.figures import FIGURES, FigureSkipped, build_figures
from lade_bench.report.sweep import Sweep, sweep_from_rows
from lade_bench.report.text_health import CAPTION as TEXT_HEALTH_CAPTION
from lade_bench.report.text_health import FIGURE as TEXT_HEALTH_FIGURE


def _subset(sweep: Sweep, mask, profiles=None) -> Sweep:
    rows = sweep.rows[mask].reset_index(drop=True)
    intervals = stats.IntervalSettings(n_boot=200)
    return sweep_from_rows(rows, roots=sweep.roots, cells=sweep.cells, profiles=profiles, intervals=intervals)


# The one figure this single-device sweep cannot feed; tests/runner/test_runner_multi_device.py draws
# it from a real torchrun sweep.
MULTI_DEVICE = "speedup_vs_devices"


def test_every_figure_is_written_as_png_and_pdf(sweep_report):
    # The report the CLI wrote of the sweep (conftest.py): what it printed, and its files.
    lines = sweep_report.printed.splitlines()
    written = [Path(line.split()[1]) for line in lines if line.startswith("figure ")]
    skipped = dict(line.removeprefix("skipped ").split(": ", 1) for line in lines if line.startswith("skipped "))
    assert [name for name in skipped if name in FIGURES] == [MULTI_DEVICE]
    assert "no greedy cell ran on more than one device" in skipped[MULTI_DEVICE]
    # The registry's figures, then the text-health figure (report.text_health: its rows record accepted tokens).
    assert [png.stem for png in written] == [*(name for name in FIGURES if name != MULTI_DEVICE), TEXT_HEALTH_FIGURE]
    for png in written:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
        assert FIGURES[png.stem].caption if png.stem in FIGURES else TEXT_HEALTH_CAPTION


def test_figures_name_model_device_and_sweep(sweep):
    fig = FIGURES["speedup_bars"].draw(sweep)
    title = fig._suptitle.get_text()
    assert "tiny-llama" in title and "cpu" in title and "unit_report" in title
    ax = fig.axes[0]
    assert "×" in ax.get_ylabel() and ax.get_xlabel()


def test_pdf_is_reproducible(sweep, tmp_path):
    first, _ = build_figures(sweep, tmp_path / "a", names=["speedup_heatmap_wg"])
    second, _ = build_figures(sweep, tmp_path / "b", names=["speedup_heatmap_wg"])
    assert first[0].pdf.read_bytes() == second[0].pdf.read_bytes()


def test_absent_inputs_skip_with_reason(sweep, tmp_path, caplog):
    greedy_n3 = _subset(sweep, ~sweep.rows["do_sample"] & (sweep.rows["ngram"] == 3))
    with caplog.at_level("INFO", logger="lade_bench.report.figures"):
        written, skipped = build_figures(greedy_n3, tmp_path)
    assert set(skipped) == {"rouge_parity", "speedup_compression_vs_n", "device_profile", MULTI_DEVICE}
    assert "no sampling cells" in skipped["rouge_parity"]
    assert "two or more values of N" in skipped["speedup_compression_vs_n"]
    assert "no device profile" in skipped["device_profile"]
    assert "figure rouge_parity skipped" in caplog.text
    assert {f.name for f in written} == {"speedup_heatmap_wg", "speedup_bars", "accept_length_histogram"}
    assert not (tmp_path / "rouge_parity.png").exists()


def test_sampling_only_sweep(sweep):
    sampled = _subset(sweep, sweep.rows["do_sample"])
    for name in ("speedup_heatmap_wg", "speedup_bars", "accept_length_histogram"):
        with pytest.raises(FigureSkipped):
            FIGURES[name].draw(sampled)
    assert FIGURES["rouge_parity"].draw(sampled) is not None
