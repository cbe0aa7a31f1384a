"""A self-contained HTML report: figures as base64 PNG, tables as HTML, configs in ``<details>``.

One file with no external resource (no CDN, no linked image), so it can be mailed, archived or opened
from a results folder offline. A small inline script counts the figures the browser decoded and
writes the count into the footer (and ``data-figures-*`` attributes on ``<body>``), so a broken image
is visible to a reader and checkable by a headless browser.
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from lade_bench import stats
from lade_bench.report import aggregate, conditions
from lade_bench.report.figures import FigureOutput
from lade_bench.report.sweep import Sweep
from lade_bench.report.table_format import to_html
from lade_bench.results.atomic import atomic_write_text

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: .85em; }
caption { caption-side: top; text-align: left; font-style: italic; padding: .3em 0; max-width: 60em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; } th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #444; }
pre { background: #f7f7f7; padding: .6em; overflow-x: auto; font-size: .8em; }
details { margin: .4em 0; } summary { cursor: pointer; }
.skipped { color: #8a5a00; } footer { margin-top: 3em; font-size: .85em; color: #666; }
"""

# Runs on window load, when every data-URI image has been decoded (or failed).
_SCRIPT = """
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.querySelectorAll("img.figure"));
  var ok = imgs.filter(function (im) { return im.complete && im.naturalWidth > 0; }).length;
  document.body.setAttribute("data-figures-total", String(imgs.length));
  document.body.setAttribute("data-figures-rendered", String(ok));
  var status = document.getElementById("render-status");
  status.textContent = ok + " of " + imgs.length + " figures rendered.";
  if (ok !== imgs.length) { status.style.color = "#b00"; }
});
"""


def _esc(text: object) -> str:
    return html.escape(str(text))


def _figure_html(fig: FigureOutput) -> str:
    data = base64.b64encode(fig.png.read_bytes()).decode("ascii")
    return (
        f'<figure id="fig-{_esc(fig.name)}"><img class="figure" alt="{_esc(fig.name)}" '
        f'src="data:image/png;base64,{data}"><figcaption><b>{_esc(fig.name)}</b>: {_esc(fig.caption)} '
        f"(PDF: {_esc(fig.pdf.name)})</figcaption></figure>"
    )


def _overview(sweep: Sweep) -> str:
    shas = sorted({str(c.manifest.get("git_sha")) for c in sweep.cells if c.manifest})
    dirty = any(c.manifest.get("git_dirty") for c in sweep.cells if c.manifest)
    n_cells = sweep.summary[["sweep", "cell_id"]].drop_duplicates().shape[0] if len(sweep.summary) else 0
    n_errors = int(sweep.rows["error"].notna().sum())
    items = {
        "Sweep": sweep.label,
        "Folders": ", ".join(p.name for p in sweep.roots),
        "Models": ", ".join(sweep.models) or "none",
        "Devices": ", ".join(sweep.devices) or "unknown",
        "Git": ", ".join(shas) + (" (dirty working tree)" if dirty else "") if shas else "unknown",
        "Cells": str(n_cells),
        # Eager and/or compiled cells (compile=true): their speedups answer different questions.
        "Modes": ", ".join(_modes(sweep.summary)) or "none",
        "Rows": f"{len(sweep.rows)} ({n_errors} with an error)",
    }
    if not sweep.index.empty and "status" in sweep.index:
        failed = sweep.index[sweep.index["status"] == "failed"]
        items["Failed cells"] = str(len(failed))
    body = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in items.items())
    return f"<table>{body}</table>"


def _modes(summary: pd.DataFrame) -> list[str]:
    """The modes of the sweep's cells (``stats.mode_label``), eager first."""
    if summary.empty:
        return []
    labels = {stats.mode_label(r["compiled"], r["compile_mode"]) for r in summary.to_dict("records")}
    return sorted(labels, key=lambda label: (label != stats.EAGER, label))


def _cells_html(sweep: Sweep) -> str:
    parts = []
    for cell in sweep.cells:
        inner = [f"<p>folder: <code>{_esc(cell.path.name)}</code></p>"]
        for title, text in (
            ("config.yaml (resolved config)", cell.config_text),
            ("manifest.json", json.dumps(cell.manifest, indent=2) if cell.manifest else None),
            ("summary.json (runner's cache; the tables above are recomputed from rows)", cell.summary_text),
        ):
            if text:
                inner.append(f"<details><summary>{_esc(title)}</summary><pre>{_esc(text)}</pre></details>")
        parts.append(f"<details><summary>{_esc(cell.sweep)} / {_esc(cell.cell_id)}</summary>{''.join(inner)}</details>")
    return "".join(parts) or "<p>No cells.</p>"


def _statistics_html(sweep: Sweep) -> str:
    """How to read the numbers: paired units, n, intervals, speedup basis, headline selection."""
    items = "".join(f"<li>{_esc(rule)}</li>" for rule in aggregate.statistics_rules(sweep.intervals.min_units))
    return f'<div id="statistics"><p>How the numbers are computed:</p><ul>{items}</ul></div>'


def _conditions_html(sweep: Sweep) -> str:
    """Which cells ran under interference, and the drift of identical AR work across cells (with n)."""
    cells = conditions.interference_table(sweep.cells, sweep.rows)
    flagged = int((cells["interference"] != "none seen").sum()) if len(cells) else 0
    parts = [
        f"<p>{flagged} of {len(cells)} cell(s) show a sign of interference (load average above the CPUs of "
        "the process's affinity, another lade_bench/pytest process running, or rows resumed after a gap); "
        "their speedups compare times taken under different conditions.</p>",
        to_html(cells, caption="Timing conditions per cell (from each manifest's timing_conditions)"),
    ]
    # One CPU kind per group: a sweep resumed on another machine would otherwise show the machines'
    # difference as drift; a cell resumed on another CPU mixes two and joins no group.
    cpus = conditions.cell_processors(sweep.cells)
    dtypes = conditions.cell_dtypes(sweep.cells)
    drift = stats.ar_drift(sweep.rows, cpus, skip_cpus=frozenset({conditions.PROCESSOR_MIXED}), cell_dtypes=dtypes)
    if drift.empty:
        parts.append(
            "<p>No two cells of a sweep did identical AR work on one CPU kind, so no AR drift can be measured.</p>"
        )
    else:
        caption = (
            "Drift of the AR arm: AR time per token across cells of one sweep with identical AR work on one "
            "CPU kind (relative spread = (max - min) / median, n = cells); speedup differences between those cells "
            "smaller than this are within the machine's drift"
        )
        parts.append(to_html(conditions.drift_table(drift), caption=caption))
    return "".join(parts)


def render_html(
    sweep: Sweep,
    figures: Sequence[FigureOutput],
    skipped: Mapping[str, str],
    tables: Mapping[str, tuple[str, pd.DataFrame]],
    summary_table: pd.DataFrame,
) -> str:
    """The report page as one HTML string.

    Args:
        sweep: the loaded sweep (overview, cell configs).
        figures: written figures (their PNGs are embedded).
        skipped: ``{figure name: reason}``, listed so an absent figure is explained.
        tables: ``{name: (caption, display table)}`` of the paper tables.
        summary_table: the per-(cell, arm) summary as display strings.
    """
    figure_html = "".join(_figure_html(f) for f in figures) or "<p>No figures.</p>"
    skipped_html = "".join(f"<li><b>{_esc(k)}</b>: {_esc(v)}</li>" for k, v in skipped.items())
    if skipped_html:
        figure_html += f'<div class="skipped"><p>Skipped figures:</p><ul>{skipped_html}</ul></div>'
    table_html = "".join(
        f'<div id="table-{_esc(name)}">{to_html(table, caption=f"{name}: {caption}")}</div>'
        for name, (caption, table) in tables.items()
    )
    toc = (
        '<ul><li><a href="#figures">Figures</a></li><li><a href="#tables">Tables</a></li>'
        '<li><a href="#summary">All cells</a></li><li><a href="#conditions">Timing conditions</a></li>'
        '<li><a href="#configs">Configs</a></li></ul>'
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>LADE report: {_esc(sweep.label)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Lookahead decoding report: {_esc(sweep.label)}</h1>"
        f"<p>{_esc(sweep.context_line())}</p>{_overview(sweep)}{toc}"
        f'<h2 id="figures">Figures</h2>{figure_html}'
        f'<h2 id="tables">Tables</h2>{_statistics_html(sweep)}{table_html or "<p>No paper tables apply.</p>"}'
        f'<h2 id="summary">All cells</h2>{to_html(summary_table, caption="Every (cell, method): recomputed from rows")}'
        f'<h2 id="conditions">Timing conditions</h2>{_conditions_html(sweep)}'
        f'<h2 id="configs">Configs</h2>{_cells_html(sweep)}'
        '<footer><p id="render-status">Figures not checked (JavaScript off).</p>'
        "<p>Generated by <code>python -m lade_bench.report</code>; every number is recomputed from the "
        "per-sample rows.</p></footer>"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


def write_html(path: str | os.PathLike[str], page: str) -> Path:
    """Write the page atomically (a reader never sees half a report) and return its path."""
    path = Path(path)
    atomic_write_text(path, page)
    return path
