"""docs/token_recycling.md's measured effect of the authors' loop is the committed per-sample JSON's.

``docs/engine_bench/token_recycling_loop_effect.json`` (written by ``scripts/token_recycling_effect.py``
from real runner cells, its commands and commit inside) holds every sample's Token Recycling row beside
its AR row's step widths, per configuration and state mode. Here each configuration's numbers are
recomputed from those rows (the project's pooled tau and width, ``stats.profile_replay`` on the committed
device profile) and the docs' table must quote them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .effect_json import check_configuration_summaries

ROOT = Path(__file__).resolve().parents[2]
EFFECT = ROOT / "docs" / "engine_bench" / "token_recycling_loop_effect.json"
DOC = ROOT / "docs" / "token_recycling.md"
# A table row: | model | `label` | warm | n | tau | width | outputs = AR | predicted speedup |
ROW = re.compile(
    r"^\| ([\w.-]+) \| `(Token Recycling[^`]*)` \| (warm|cold) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| "
    r"(\d+)% \| ([\d.]+)x \|$",
    re.M,
)
OURS = "Token Recycling (+ prefill refresh, whole-prompt prefill)"


@pytest.fixture(scope="module")
def effect() -> dict:
    """The committed per-sample numbers."""
    return json.loads(EFFECT.read_text())


def test_each_configuration_summary_is_its_rows_and_every_output_is_ar(effect):
    configurations = check_configuration_summaries(effect, lambda c: ROOT / effect["profiles"][c["model"]])
    assert {c["label"] for c in configurations} == {
        "Token Recycling",
        "Token Recycling (+ prefill refresh, whole-prompt prefill)",
    }


def test_the_docs_table_quotes_the_committed_numbers(effect):
    quoted = {m.groups()[:3]: m.groups()[3:] for m in ROW.finditer(DOC.read_text())}
    expected = {}
    for c in effect["configurations"]:
        s = c["summary"]
        expected[c["model"], c["label"], c["method_state"]] = (
            str(s["n"]),
            f"{s['tau']:.2f}",
            f"{s['width']:.1f}",
            f"{s['matches_ar'] * 100:.0f}",
            f"{s['predicted_speedup']:.2f}",
        )
    assert quoted == expected


def test_the_docs_prose_sizes_the_difference_from_the_committed_numbers(effect):
    """Per model, the prose's "accepts N% more per step warm and M% more cold, which the profile turns into
    a predicted Rx warm and Sx cold the authors' loop's speed" (our earlier loop over the authors')."""
    summaries = {(c["model"], c["label"], c["method_state"]): c["summary"] for c in effect["configurations"]}
    text = re.sub(r"\s+", " ", DOC.read_text())
    for model in {c["model"] for c in effect["configurations"]}:
        ratio = {
            (key, mode): summaries[model, OURS, mode][key] / summaries[model, "Token Recycling", mode][key]
            for key in ("tau", "predicted_speedup")
            for mode in ("warm", "cold")
        }
        sentence = (
            f"accepts {(ratio['tau', 'warm'] - 1) * 100:.0f}% more per step warm and "
            f"{(ratio['tau', 'cold'] - 1) * 100:.0f}% more cold, which the profile turns into a predicted "
            f"{ratio['predicted_speedup', 'warm']:.2f}x warm and {ratio['predicted_speedup', 'cold']:.2f}x cold the "
            "authors' loop's speed"
        )
        assert sentence in text, (model, sentence)
