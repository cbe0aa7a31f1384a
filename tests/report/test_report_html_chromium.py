"""The HTML report opens in a real (headless) browser and every figure in it decodes."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from lade_bench.report.build import FIGURES_DIR, REPORT_HTML
from lade_bench.report.figures import FIGURES
from lade_bench.report.text_health import FIGURE as TEXT_HEALTH_FIGURE

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _chromium() -> str | None:
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


@pytest.mark.slow
def test_html_report_renders_every_figure_in_chromium(sweep_report, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium on PATH (Debian package 'chromium'; scripts/setup.sh installs it)")
    page = sweep_report.out / REPORT_HTML  # the report the CLI wrote (conftest.py)
    figures_written = sorted(p.stem for p in (sweep_report.out / FIGURES_DIR).glob("*.png"))
    profile = tmp_path / "chrome-profile"
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body, dom[:500]
    total = re.search(r'data-figures-total="(\d+)"', body.group(0))
    rendered = re.search(r'data-figures-rendered="(\d+)"', body.group(0))
    assert total and rendered, f"the page's load script did not run: {body.group(0)}"
    # No multi-device cell here; the text-health figure is drawn beside the registry's.
    drawn = [*(name for name in FIGURES if name != "speedup_vs_devices"), TEXT_HEALTH_FIGURE]
    assert int(total.group(1)) == len(drawn) and figures_written == sorted(drawn)
    assert int(rendered.group(1)) == len(drawn), "some figures did not decode in the browser"
    assert f"{len(drawn)} of {len(drawn)} figures rendered." in dom
    for name in drawn:
        assert f'id="fig-{name}"' in dom
