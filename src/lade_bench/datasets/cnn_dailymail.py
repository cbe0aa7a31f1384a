"""CNN/DailyMail news summarization: hub ``abisee/cnn_dailymail`` (config "3.0.0") or local JSONL."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lade_bench.datasets._sources import load_hub_rows, locate, read_located_records
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample
from lade_bench.datasets.scorers import ROUGE_COLUMNS, score_rouge
from lade_bench.datasets.spec import DatasetSpec, Prompt

HUB_ID = "abisee/cnn_dailymail"
HUB_CONFIG = "3.0.0"
FIELDS = ("id", "article", "highlights")
LOCAL_FORMAT = "JSONL in the hub schema: id, article, highlights"
TASK = "summarization"
SOURCE = f"hub {HUB_ID} (config {HUB_CONFIG})"

# The gold highlights are three or four short sentences; asking for that keeps lengths comparable.
INSTRUCTION = "Summarize the following news article in three or four sentences."


def prompt(row: Mapping[str, Any]) -> Prompt:
    """The three-or-four-sentences instruction, then the article."""
    return Prompt(turns=(f"{INSTRUCTION}\n\n{row['article'].strip()}",))


def load(path: Path | None, split: str) -> list[Sample]:
    """Load CNN/DailyMail from ``path`` or the hub split ``split``.

    The reference is the ``highlights`` text as is: one sentence per line, which is how ROUGE-Lsum
    splits summaries.
    """
    if path is not None:
        records = read_located_records(path)
    else:
        records = locate(
            load_hub_rows(HUB_ID, HUB_CONFIG, split, dataset="cnn_dailymail", local_format=LOCAL_FORMAT),
            f"{HUB_ID} {split}",
        )

    def make(row: dict, index: int) -> Sample:
        return Sample(
            sample_id=str(row["id"]),
            turns=prompt(row).turns,
            reference=row["highlights"],
            task=TASK,
        )

    return build_samples(
        records, str(path) if path else f"{HUB_ID} {split}", FIELDS, make, id_field="id", text_fields=("article",)
    )


SPEC = DatasetSpec(
    name="cnn_dailymail",
    load=load,
    prompt=prompt,
    task=TASK,
    scorer=score_rouge,
    quality_columns=ROUGE_COLUMNS,
    runs_code=False,
    config="cnn_dailymail",
    source=SOURCE,
    local_format=LOCAL_FORMAT,
)
