"""The READMEs' roofline sections say only what the committed roofline tables hold (issue 67).

Each sentence of the ``<!-- roofline_prose -->`` section of ``paper_figures/spec_bench/README.md`` (its
table: ``paper_figures/spec_bench/tables/roofline.csv``) and of ``paper_figures/README.md`` (the main
sweep's: ``paper_figures/main_roofline/tables/roofline.csv``) ends in a marker naming the table records
it explains::

    <!-- roofline wins: model=gemma3-270m arm=suffix_decoding -->
    <!-- roofline loses: model=smollm2-135m-instruct arm=pia group=summarization,qa -->
    <!-- roofline cannot-tell: model=gemma3-270m arm=prompt_lookup group=summarization -->
    <!-- roofline: model=smollm2-135m-instruct arm=pia group=translation -->   (numbers only)
    <!-- roofline below: arm=lookahead -->   (predicted below measured in each)
    <!-- roofline disagrees: ... -->   (predicted and measured verdict on different sides of 1)
    <!-- roofline sides agree -->   (every other decided record predicted on its side of 1)

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
FIGURES = ROOT / "paper_figures"
# Each README with a roofline section, and the committed table its sentences quote.
DOCUMENTS = {
    "spec_bench": (FIGURES / "spec_bench" / "README.md", FIGURES / "spec_bench" / "tables" / "roofline.csv"),
    "main": (FIGURES / "README.md", FIGURES / "main_roofline" / "tables" / "roofline.csv"),
}
SECTION = re.compile(r"<!-- roofline_prose -->(.*?)<!-- /roofline_prose -->", re.S)
MARKER = re.compile(r"<!-- roofline(?: ([a-z-]+))?:? ?(.*?) -->")
VERDICTS = {"wins": "faster", "loses": "slower", "cannot-tell": "cannot tell"}
WORDS = {"wins": "win", "loses": "lose", "cannot-tell": "cannot tell"}
SHOWN = (
    "accepted_per_step", "relative_step_cost", "predicted_speedup", "measured_speedup", "measured_ci_low",
    "measured_ci_high",
)  # fmt: skip


@pytest.fixture(scope="module", params=sorted(DOCUMENTS))
def document(request) -> tuple[str, pd.DataFrame]:
    """A README's roofline section and the committed roofline table it quotes, at full precision."""
    readme, table = DOCUMENTS[request.param]
    found = SECTION.search(readme.read_text(encoding="utf-8"))
    assert found, f"{readme}: no <!-- roofline_prose --> section"
    return found.group(1), pd.read_csv(table, keep_default_na=False, dtype={"setting": str})


def _sentences(section: str) -> list[tuple[str, str, str]]:
    """(kind, selectors, the text since the previous marker) for every marker of the section."""
    found, start = [], 0
    for marker in MARKER.finditer(section):
        found.append((marker.group(1) or "", marker.group(2), section[start : marker.start()]))
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


def _named(table: pd.DataFrame, sentences: list[tuple[str, str, str]], kinds: set[str] | None = None) -> set[int]:
    """The table's records some marker (of ``kinds``, default every kind with selectors) names."""
    return {
        index
        for kind, selectors, _ in sentences
        if kind != "sides" and (kinds is None or kind in kinds)
        for index in _select(table, selectors).index
    }


def _disagreeing(table: pd.DataFrame) -> pd.DataFrame:
    """Records whose interval excludes 1 on one side while the prediction lies on the other (or at 1)."""
    faster, slower = table["verdict"] == "faster", table["verdict"] == "slower"
    return table[(faster & (table["predicted_speedup"] <= 1)) | (slower & (table["predicted_speedup"] >= 1))]


def test_every_sentence_quotes_only_its_records_numbers_and_verdicts(document):
    """Each marked sentence's decimals are its records' printed numbers; a verdict marker's records carry
    it and the sentence says it; a below (disagrees) marker's records are predicted below their measured
    speedup (on the other side of 1 from their verdict)."""
    section, table = document
    sentences = _sentences(section)
    assert len(sentences) >= 10
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
            assert WORDS[kind] in prose, (selectors, prose)
        elif kind == "below":
            assert (records["predicted_speedup"] < records["measured_speedup"]).all(), selectors
        elif kind == "disagrees":
            assert set(records.index) <= set(_disagreeing(table).index), selectors
        else:
            assert kind == "", f"unknown marker kind {kind!r}"


def test_every_win_and_loss_of_the_table_has_its_sentence(document):
    """Each record the table calls faster or slower is named by a sentence's marker."""
    section, table = document
    named = _named(table, _sentences(section))
    decided = table[table["verdict"].isin(["faster", "slower"])]
    missing = decided.loc[~decided.index.isin(named), ["model", "arm", "setting", "group", "verdict"]]
    assert missing.empty, missing.to_string()


def test_the_prediction_is_on_the_measured_side_of_1_except_where_the_section_says(document):
    """The section says the predicted speedup is on the same side of 1 wherever the interval excludes 1,
    but for the records its disagrees markers name: exactly those disagree."""
    section, table = document
    sentences = _sentences(section)
    assert any(kind == "sides" for kind, _, _ in sentences)
    assert set(_disagreeing(table).index) == _named(table, sentences, {"disagrees"})


def test_the_table_is_the_step_cost_model_ratio(document):
    """Predicted = accepted per step / relative cost in every record, so the figure's iso-lines are exact."""
    _, table = document
    ratio = table["accepted_per_step"] / table["relative_step_cost"]
    assert ((ratio - table["predicted_speedup"]).abs() < 1e-12).all()


def test_the_main_readme_names_the_cpu_kind_of_each_smollm2_lookahead_cost():
    """The declared lookahead's SmolLM2 cells on MT-Bench and XSum were costed on the Intel Xeon's
    profile, the other four on the AMD EPYC's, as the main README's sentence says."""
    table = pd.read_csv(DOCUMENTS["main"][1], keep_default_na=False, dtype={"setting": str})
    cells = table[(table["model"] == "smollm2-135m-instruct") & (table["setting"] == "n5-w7-g7-pool")]
    for rec in cells.to_dict("records"):
        kind = "Intel Xeon" if rec["group"] in ("mt_bench", "xsum") else "AMD EPYC"
        assert rec["profile_processor"].startswith(kind), rec


def test_the_main_readme_says_why_prompt_lookup_is_predicted_above_its_measurement():
    """Prompt lookup's main rows recorded no forward time (no outside time in its prediction), and its
    prediction lies above its measured speedup in every cell, as the main README's section says."""
    table = pd.read_csv(DOCUMENTS["main"][1], keep_default_na=False, dtype={"setting": str})
    lookup = table[table["arm"] == "prompt_lookup"]
    assert len(lookup) and (lookup["arm_rows_without_outside_time"] == lookup["arm_rows"]).all()
    assert (lookup["predicted_speedup"] > lookup["measured_speedup"]).all()
