"""The W&B Report: built offline (saving it needs network and an account, so it is not tested here)."""

from __future__ import annotations

import pytest

from lade_bench.report.wandb_report import SUMMARY_BAR_METRICS, build_wandb_report, publish_wandb_report
from lade_bench.report.wandb_sink import WandbSettings


def test_report_object_has_the_html_reports_panels():
    import wandb_workspaces.reports.v2 as wr

    report = build_wandb_report(
        project="lade-bench",
        entity="someone",
        group="ablation_wg",
        figure_names=["speedup_heatmap_wg", "speedup_bars"],
        table_names=["ablation_wg"],
        description="model: m | device: d | sweep: ablation_wg",
    )
    assert report.project == "lade-bench" and report.entity == "someone"
    grids = [b for b in report.blocks if isinstance(b, wr.PanelGrid)]
    media = [p for g in grids for p in g.panels if isinstance(p, wr.MediaBrowser)]
    assert [m.media_keys for m in media] == [["figures/speedup_heatmap_wg"], ["figures/speedup_bars"]]
    tables = [p for g in grids for p in g.panels if isinstance(p, wr.WeavePanelSummaryTable)]
    assert [t.table_name for t in tables] == ["tables/ablation_wg"]
    bars = [p for g in grids for p in g.panels if isinstance(p, wr.BarPlot)]
    assert len(bars) == len(SUMMARY_BAR_METRICS)
    assert all(g.runsets[0].project == "lade-bench" for g in grids)
    # Report.save() (and even building its payload, which resolves run sets) needs a W&B server.


def test_publishing_needs_online_mode():
    with pytest.raises(ValueError, match="online"):
        publish_wandb_report(None, WandbSettings(mode="offline"))
