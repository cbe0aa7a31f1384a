"""The Spec-Bench README's roofline section says only what the committed roofline table holds (issue 67).

Each sentence of ``paper_figures/spec_bench/README.md``'s ``<!-- roofline_prose -->`` section ends in a
marker naming the table records it explains::

    <!-- roofline wins: model=gemma3-270m arm=suffix_decoding -->
    <!-- roofline loses: model=smollm2-135m-instruct arm=pia group=summarization,qa -->
    <!-- roofline cannot-tell: model=gemma3-270m arm=prompt_lookup group=summarization -->
    <!-- roofline: model=smollm2-135m-instruct arm=pia group=translation -->   (numbers only)
    <!-- roofline below: arm=lookahead -->   (predicted below measured in each)

Every decimal of a sentence must be a number the table prints for one of its records (accepted per
step, relative cost, predicted, measured and its interval's ends, to two decimals), every record a
verdict marker names must carry that verdict, and every win and loss of the table must be explained
by some sentence. Cheap: it reads the committed CSV and README, no rows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "paper_figures" / "spec_bench"
TABLE = FOLDER / "tables" / "roofline.csv"
README = FOLDER / "README.md"
SECTION = re.compile(r"<!-- roofline_prose -->(.*?)<!-- /roofline_prose -->", re.S)
MARKER = re.compile(r"<!-- roofline(?: ([a-z-]+))?:? ?(.*?) -->")
VERDICTS = {"wins": "faster", "loses": "slower", "cannot-tell": "cannot tell"}
SHOWN = (
    "accepted_per_step", "relative_step_cost", "predicted_speedup", "measured_speedup", "measured_ci_low",
    "measured_ci_high",
)  # fmt: skip


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """The committed roofline table at full precision."""
    return pd.read_csv(TABLE, keep_default_na=False, dtype={"setting": str})


def _section() -> str:
    found = SECTION.search(README.read_text(encoding="utf-8"))
    assert found, f"{README}: no <!-- roofline_prose --> section"
    return found.group(1)


def _sentences() -> list[tuple[str, str, str]]:
    """(kind, selectors, the text since the previous marker) for every marker of the section."""
    text, found, start = _section(), [], 0
    for marker in MARKER.finditer(text):
        found.append((marker.group(1) or "", marker.group(2), text[start : marker.start()]))
        start = marker.end()
    return found


def _select(table: pd.DataFrame, selectors: str) -> pd.DataFrame:
    """The records whose columns take one of the listed values (``column=a,b``) of every selector."""
    chosen = table
    for part in selectors.split():
        column, values = part.split("=")
        chosen = chosen[chosen[column].astype(str).isin(values.split(","))]
    return chosen


def _printed(records: pd.DataFrame) -> set[str]:
    return {f"{value:.2f}" for column in SHOWN for value in records[column]}


def test_every_sentence_quotes_only_its_records_numbers_and_verdicts(table):
    """Each marked sentence's decimals are its records' printed numbers; a verdict marker's records carry it."""
    sentences = _sentences()
    assert len(sentences) >= 20
    for kind, selectors, sentence in sentences:
        if kind == "sides":
            continue
        records = _select(table, selectors)
        assert len(records), selectors
        prose = re.sub(r"\s+", " ", re.sub(r"<!--.*?-->", "", sentence, flags=re.S))
        quoted = set(re.findall(r"(?<![\d.])(\d+\.\d+)", prose))
        assert quoted <= _printed(records), (selectors, sorted(quoted - _printed(records)))
        if kind in VERDICTS:
            assert set(records["verdict"]) == {VERDICTS[kind]}, (selectors, set(records["verdict"]))
            words = {"wins": "win", "loses": "lose", "cannot-tell": "cannot tell"}[kind]
            assert words in prose, (selectors, prose)
        elif kind == "below":
            assert (records["predicted_speedup"] < records["measured_speedup"]).all(), selectors


def test_every_win_and_loss_of_the_table_has_its_sentence(table):
    """Each record the table calls faster or slower is named by a sentence's marker."""
    named: set[int] = set()
    for kind, selectors, _ in _sentences():
        if kind != "sides":
            named |= set(_select(table, selectors).index)
    decided = table[table["verdict"].isin(["faster", "slower"])]
    missing = decided.loc[~decided.index.isin(named), ["model", "arm", "setting", "group", "verdict"]]
    assert missing.empty, missing.to_string()


def test_the_prediction_is_on_the_measured_side_of_1_wherever_the_table_decides(table):
    """The section says the model's predicted speedup is on the same side of 1 wherever the interval
    excludes 1: every faster record is predicted above 1, every slower one below."""
    assert any(kind == "sides" for kind, _, _ in _sentences())
    faster, slower = table[table["verdict"] == "faster"], table[table["verdict"] == "slower"]
    assert (faster["predicted_speedup"] > 1).all() and (slower["predicted_speedup"] < 1).all()


def test_the_table_is_the_step_cost_model_ratio(table):
    """Predicted = accepted per step / relative cost in every record, so the figure's iso-lines are exact."""
    ratio = table["accepted_per_step"] / table["relative_step_cost"]
    assert ((ratio - table["predicted_speedup"]).abs() < 1e-12).all()
