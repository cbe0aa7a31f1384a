"""docs/rest.md's measured effect of REST's tree budget is the committed per-row JSON's.

``docs/engine_bench/rest_tree_budget.json`` (written by ``scripts/rest_tree_budget_effect.py``, its
command and commit inside) holds every committed Spec-Bench REST row replayed with the real drafter at
both ``rest.tree_budget`` values, beside its AR row's step widths; the script checked the replay
against every committed row at ``most_frequent_nodes`` (the rule those cells ran) and against the rows
of a real run at ``cut_to_choices``. Here each configuration's numbers are recomputed from those rows
(the project's pooled tau and width, ``stats.profile_replay`` on the committed device profile) and the
docs' table must quote them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from lade_bench.stats.efficiency import mean_decode_step_accepted, mean_decode_step_tokens
from lade_bench.stats.profile_replay import replayed_speedup

ROOT = Path(__file__).resolve().parents[2]
EFFECT = ROOT / "docs" / "engine_bench" / "rest_tree_budget.json"
DOC = ROOT / "docs" / "rest.md"
# A table row: | `label` | model | n | tau | width | outputs = AR | predicted speedup over AR |
ROW = re.compile(r"^\| `(REST[^`]*)` \| ([\w.-]+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| (\d+)% \| ([\d.]+)x \|$", re.M)


@pytest.fixture(scope="module")
def effect() -> dict:
    """The committed per-row numbers."""
    return json.loads(EFFECT.read_text())


def test_each_configuration_summary_is_its_rows_and_every_output_is_ar(effect):
    labels = set()
    for configuration in effect["configurations"]:
        rows = pd.DataFrame(configuration["rows"])
        profile = json.loads((ROOT / configuration["profile"]).read_text())
        recomputed = {
            "n": len(rows),
            "tau": mean_decode_step_accepted(rows),
            "width": mean_decode_step_tokens(rows),
            "matches_ar": float(rows["matches_ar"].astype(bool).mean()),
            "predicted_speedup": replayed_speedup(rows["step_tokens"], rows["ar_step_tokens"], profile),
        }
        assert configuration["summary"] == pytest.approx(recomputed)
        assert configuration["summary"]["matches_ar"] == 1.0
        labels.add(configuration["label"])
    assert labels == {"REST", "REST (64 most frequent nodes)"}
    # The replay was checked against every committed row, and against real rows at the authors' rule.
    assert effect["replay_checked"]["committed_rows_most_frequent_nodes"] == 140
    assert effect["replay_checked"]["real_run_rows_cut_to_choices"] > 0


def test_the_docs_table_quotes_the_committed_numbers(effect):
    quoted = {(m[1], m[2]): m.groups()[2:] for m in ROW.finditer(DOC.read_text())}
    expected = {}
    for c in effect["configurations"]:
        s = c["summary"]
        expected[c["label"], c["model"]] = (
            str(s["n"]),
            f"{s['tau']:.3f}",
            f"{s['width']:.1f}",
            f"{s['matches_ar'] * 100:.0f}",
            f"{s['predicted_speedup']:.2f}",
        )
    assert quoted == expected


def test_the_docs_ratios_are_the_committed_predictions(effect):
    speedup = {(c["model"], c["tree_budget"]): c["summary"]["predicted_speedup"] for c in effect["configurations"]}
    ratios = [
        speedup[model, "cut_to_choices"] / speedup[model, "most_frequent_nodes"]
        for model in ("smollm2-135m-instruct", "gemma3-270m")
    ]
    quoted = re.search(
        r"predicted\s+([\d.]+)x as fast as ours was on SmolLM2 and ([\d.]+)x on Gemma-3-270M", DOC.read_text()
    )
    assert quoted is not None and quoted.groups() == tuple(f"{r:.2f}" for r in ratios)
