"""docs/pia.md's measured effect of ``pia.draft_earlier_prompts`` is the committed per-row JSON's.

``docs/engine_bench/pia_earlier_prompts.json`` (written by ``scripts/replay_pia_drafts.py``, its command and
commit inside) holds every committed Spec-Bench PIA row replayed with the real drafter at both values,
beside its AR row's step widths; the script compared the replay at ``false`` (the rule those cells ran)
with every committed row and required every PIA row of a real run at ``true`` to equal the replay. Here
each configuration's numbers are recomputed from those rows (the project's pooled tau and width,
``stats.profile_replay`` on the committed device profile) and the docs' table and prose must quote them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .effect_json import check_configuration_summaries

ROOT = Path(__file__).resolve().parents[2]
EFFECT = ROOT / "docs" / "engine_bench" / "pia_earlier_prompts.json"
DOC = ROOT / "docs" / "pia.md"
# A table row: | `label` | model | n | tau | width | outputs = AR | predicted speedup over AR |
ROW = re.compile(r"^\| `(PIA[^`]*)` \| ([\w.-]+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| (\d+)% \| ([\d.]+)x \|$", re.M)


@pytest.fixture(scope="module")
def effect() -> dict:
    """The committed per-row numbers."""
    return json.loads(EFFECT.read_text())


def test_each_configuration_summary_is_its_rows_and_every_output_is_ar(effect):
    configurations = check_configuration_summaries(effect, lambda c: ROOT / c["profile"])
    labels = {c["label"] for c in configurations}
    assert labels == {"PIA (Ant trie lookahead)", "PIA (Ant trie lookahead, earlier prompts not drafted)"}
    checked = effect["replay_checked"]
    assert checked["committed_rows"] == 140 and checked["real_run_rows_at_draft_earlier_prompts_true"] > 0


def test_the_docs_quote_the_committed_numbers(effect):
    text = DOC.read_text()
    quoted = {(m[1], m[2]): m.groups()[2:] for m in ROW.finditer(text)}
    expected = {}
    ratio = {}
    for c in effect["configurations"]:
        s = c["summary"]
        expected[c["label"], c["model"]] = (
            str(s["n"]),
            f"{s['tau']:.3f}",
            f"{s['width']:.1f}",
            f"{s['matches_ar'] * 100:.0f}",
            f"{s['predicted_speedup']:.2f}",
        )
        ratio.setdefault(c["model"], {})[c["draft_earlier_prompts"]] = s["predicted_speedup"]
    assert quoted == expected
    checked = effect["replay_checked"]
    reproduced = checked["committed_rows"] - len(
        checked["committed_rows_not_reproduced_at_draft_earlier_prompts_false"]
    )
    assert f"reproduces every step (width and accepted length) of {reproduced} of the 140 committed rows" in text
    assert f"{checked['real_run_rows_at_draft_earlier_prompts_true']} rows before it was stopped" in text
    for model, name in (("smollm2-135m-instruct", "SmolLM2"), ("gemma3-270m", "Gemma")):
        assert f"{ratio[model][True] / ratio[model][False]:.3f}x on {name}" in text
