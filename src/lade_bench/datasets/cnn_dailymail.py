"""CNN/DailyMail news summarization: hub ``abisee/cnn_dailymail`` (config "3.0.0") or local JSONL."""

from __future__ import annotations

from pathlib import Path

from lade_bench.datasets._sources import load_hub_rows, read_records, require_fields
from lade_bench.datasets.sample import Sample

HUB_ID = "abisee/cnn_dailymail"
HUB_CONFIG = "3.0.0"
FIELDS = ("id", "article", "highlights")
LOCAL_FORMAT = "JSONL in the hub schema: id, article, highlights"
TASK = "summarization"
SOURCE = f"hub {HUB_ID} (config {HUB_CONFIG})"

# The gold highlights are three or four short sentences; asking for that keeps lengths comparable.
INSTRUCTION = "Summarize the following news article in three or four sentences."


def load(path: Path | None, split: str) -> list[Sample]:
    """Load CNN/DailyMail from ``path`` or the hub split ``split``.

    The reference is the ``highlights`` text as is: one sentence per line, which is how ROUGE-Lsum
    splits summaries.
    """
    if path is not None:
        rows, source = read_records(path), str(path)
    else:
        rows = load_hub_rows(HUB_ID, HUB_CONFIG, split, dataset="cnn_dailymail", local_format=LOCAL_FORMAT)
        source = HUB_ID
    samples = []
    for index, row in enumerate(rows):
        require_fields(row, FIELDS, source=source, index=index)
        samples.append(
            Sample(
                sample_id=str(row["id"]),
                turns=(f"{INSTRUCTION}\n\n{row['article'].strip()}",),
                reference=row["highlights"],
                task=TASK,
            )
        )
    return samples
