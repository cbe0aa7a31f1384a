"""The report entry point: `python -m lade_bench.report <sweep> --out DIR` writes everything."""

from __future__ import annotations

import re
import subprocess
import sys

from lade_bench.report.build import build_report
from lade_bench.report.figures import FIGURES
from lade_bench.report.tables import PAPER_TABLES
from lade_bench.report.text_health import FIGURE as TEXT_HEALTH_FIGURE


def test_cli_writes_figures_tables_and_html(sweep_report):
    # The report the CLI wrote (conftest.py: main([sweep, "--out", out, "--n-boot", "300"]), built once).
    tmp_path, printed = sweep_report.out, sweep_report.printed
    # No multi-device cell here; the text-health figure is drawn beside the registry's (its rows record
    # accepted tokens per step).
    drawn = [*(name for name in FIGURES if name != "speedup_vs_devices"), TEXT_HEALTH_FIGURE]
    for name in drawn:
        assert (tmp_path / "figures" / f"{name}.png").is_file()
        assert (tmp_path / "figures" / f"{name}.pdf").is_file()
    for name in PAPER_TABLES:
        assert (tmp_path / "tables" / f"{name}.tex").is_file()
        assert (tmp_path / "tables" / f"{name}.md").is_file()
    assert (tmp_path / "tables" / "cells_summary.csv").is_file()
    assert "report  file://" in printed
    page = (tmp_path / "report.html").read_text()
    assert len(re.findall(r'<img class="figure"[^>]*src="data:image/png;base64,', page)) == len(drawn)
    # self-contained: nothing is fetched from elsewhere
    assert not re.search(r'(src|href)="(https?:|//|file:)', page) and "<link" not in page
    assert page.count("<details>") >= 8  # one per cell at least
    assert "config.yaml" in page and "tiny-llama" in page
    # Timing conditions: these hand-built cells recorded none, and the report says so per cell.
    assert 'id="conditions"' in page and "timing conditions not recorded" in page


def test_default_out_is_inside_the_sweep_and_stale_outputs_are_removed(sweep_dir, tmp_path):
    only_greedy = tmp_path / "greedy"
    only_greedy.mkdir()
    for cell in sweep_dir.iterdir():
        if (
            cell.is_dir()
            and (cell / "config.yaml").is_file()
            and "do_sample: false" in (cell / "config.yaml").read_text()
        ):
            subprocess.run(["cp", "-r", str(cell), str(only_greedy / cell.name)], check=True)
    # A figure an earlier build drew from cells that are gone, in the default output folder.
    (only_greedy / "report" / "figures").mkdir(parents=True)
    stale = only_greedy / "report" / "figures" / "rouge_parity.png"
    stale.write_bytes(b"old")
    result = build_report(only_greedy, html=False, n_boot=100)
    assert result.out_dir == only_greedy / "report" and result.html is None
    assert (only_greedy / "report" / "figures" / "speedup_bars.png").is_file()
    assert "rouge_parity" in result.skipped and "sampling_rouge" in result.skipped
    assert not stale.exists()


def test_module_entry_point_help():
    proc = subprocess.run([sys.executable, "-m", "lade_bench.report", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--out" in proc.stdout
