"""Schema 9: Spec-Bench's reference metrics (BLEU, chrF, exact match, token F1) are quality columns,
declared metrics, and null in rows written before them. BLEU's is the mean of sentence BLEU, named so;
corpus BLEU needs the rows' BLEU counts (schema 14) and is NaN without them."""

from __future__ import annotations

import math

from lade_bench.metrics.registry import get_metric
from lade_bench.results import SCHEMA_VERSION, CellWriter, load_rows
from lade_bench.results.schema import COLUMNS_BY_NAME, upgrade_row
from lade_bench.stats import REFERENCE_METRICS, quality_means

from .results_helpers import make_row

SCORES = {"bleu": 41.5, "chrf": 63.25, "exact_match": 0.0, "token_f1": 0.5}


def test_reference_columns_round_trip_aggregate_and_upgrade(tmp_path):
    assert SCHEMA_VERSION >= 9 and set(REFERENCE_METRICS) == {
        "sentence_bleu",
        "corpus_bleu",
        "chrf",
        "exact_match",
        "token_f1",
    }
    assert all(COLUMNS_BY_NAME[name].added_in == 9 and COLUMNS_BY_NAME[name].group == "quality" for name in SCORES)
    writer = CellWriter(tmp_path)
    writer.append(make_row(sample_id="a", **SCORES))
    writer.append(make_row(sample_id="b", bleu=20.5, chrf=None, exact_match=1.0, token_f1=1.0))
    writer.finalize()
    rows = load_rows(tmp_path)
    means = quality_means(rows)
    assert means["sentence_bleu"] == get_metric("sentence_bleu").aggregate([41.5, 20.5]) == 31.0
    assert math.isnan(means["corpus_bleu"])  # no BLEU counts on these rows: no corpus to score
    assert means["chrf"] == 63.25 and means["exact_match"] == 0.5 and means["token_f1"] == 0.75
    assert math.isnan(means["accuracy"])
    old = {k: v for k, v in make_row().items() if k not in SCORES}
    assert all(upgrade_row(old)[name] is None for name in SCORES)
