"""A Spec-Bench translation cell's W&B run carries the dataset's declared quality metrics (sentence BLEU's
mean, corpus BLEU, chrF).

The summary table's columns are fixed (committed ``cells_summary.csv`` files keep theirs), so the
W&B sink adds every quality metric the cell's dataset declares (``aggregate.flat_quality``, read from
the metrics registry). Checked on a real offline run, read back from its run file.
"""

from __future__ import annotations

import json
from pathlib import Path

import sacrebleu

from lade_bench.datasets import load_dataset_samples
from lade_bench.report.wandb_run_record import RUN_RECORD_JSON, resolve_recorded
from lade_bench.results import load_rows
from lade_bench.runner import run_cell
from lade_bench.runner.sinks import default_sinks
from lade_bench.stats import SUMMARY_COLUMNS, common_rows

from ..report.wandb_records import read_offline_run
from .conftest import TINY

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "datasets" / "spec_bench_sample.jsonl"
REFERENCE_METRICS = ("sentence_bleu", "corpus_bleu", "chrf", "exact_match", "token_f1")


def test_a_translation_cells_wandb_summary_has_its_bleu_and_chrf(compose_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb_data"))  # wandb's staging, out of $HOME
    cfg = compose_cfg(
        [
            *TINY,
            "arms=[ar,prompt_lookup]",
            "dataset=spec_bench",
            f"dataset.path={SAMPLE}",
            "dataset.categories=[translation]",
            "dataset.limit=2",
            "warmup=0",
            "wandb.mode=offline",
            "wandb.log_figures=false",
            "wandb.log_table=false",
            f"output_root={tmp_path / 'out'}",
        ]
    )
    result = run_cell(cfg, default_sinks(cfg))
    assert result.status == "done"
    cell = Path(result.cell_dir)
    record = json.loads((cell / RUN_RECORD_JSON).read_text())
    run = read_offline_run(resolve_recorded(cell, record["sync_dir"]))
    assert run.exit_code == 0

    # The table has no column for them: the committed summary tables keep their columns.
    assert not set(REFERENCE_METRICS) & set(SUMMARY_COLUMNS)
    paired = common_rows(load_rows(cell))
    summary = json.loads((cell / "summary.json").read_text())
    for arm in ("ar", "prompt_lookup"):
        rows = paired[paired["arm"] == arm]
        assert len(rows) == 2 and rows["bleu"].notna().all() and rows["chrf"].notna().all()
        for metric, column in (("sentence_bleu", "bleu"), ("chrf", "chrf")):
            # per-sample mean of the rows on disk (one turn, one repeat each), as summary.json has it
            assert run.summary[f"{arm}/{metric}"] == summary["arms"][arm][metric] == rows[column].astype(float).mean()
        # Corpus BLEU of the same outputs, from their BLEU counts: sacrebleu's corpus_bleu to the last digit.
        golds = {s.sample_id: s.reference for s in load_dataset_samples("spec_bench", path=str(SAMPLE), limit=None)}
        corpus = sacrebleu.corpus_bleu(rows["output_text"].tolist(), [[golds[s] for s in rows["sample_id"]]]).score
        assert run.summary[f"{arm}/corpus_bleu"] == summary["arms"][arm]["corpus_bleu"] == corpus
        # Translation has no exact match / token F1 / ROUGE / accuracy: none is logged as a number.
        logged = {key.split("/", 1)[1] for key in run.summary if key.startswith(f"{arm}/")}
        assert logged & {*REFERENCE_METRICS, "rouge1", "accuracy"} == {"sentence_bleu", "corpus_bleu", "chrf"}
    assert run.summary["prompt_lookup/matches_ar"] == 1.0  # the table's metrics are still there
