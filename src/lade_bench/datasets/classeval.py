"""ClassEval class-level code generation: hub ``FudanSELab/ClassEval`` or a local JSON copy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lade_bench.datasets._sources import load_hub_rows, locate, read_located_records
from lade_bench.datasets.code_answer import CodeAnswer
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample
from lade_bench.datasets.spec import DatasetSpec, Prompt

HUB_ID = "FudanSELab/ClassEval"
# Checked against the upstream data/ClassEval_data.json (the hub split is built from that file).
FIELDS = ("task_id", "skeleton", "test", "solution_code", "import_statement", "class_name", "test_classes")
LOCAL_FORMAT = "ClassEval_data.json (a JSON list): task_id, skeleton, test, solution_code, class_name, ..."
TASK = "code"
SOURCE = f"hub {HUB_ID}"


def prompt(row: Mapping[str, Any]) -> Prompt:
    """ClassEval's holistic prompt ("complete the class ... in the following code").

    The skeleton is also the completion prefix a base code model continues.
    """
    instruction = (
        f"Please complete the class {row['class_name']} in the following code. "
        "Reply with the whole class in a ```python code block."
    )
    return Prompt(
        turns=(f"{instruction}\n\n```python\n{row['skeleton'].rstrip()}\n```",), completion_prefix=row["skeleton"]
    )


def load(path: Path | None, split: str) -> list[Sample]:
    """Load ClassEval from ``path`` or the hub split ``split``.

    The prompt is ClassEval's holistic one (see :func:`prompt`); the payload carries what its
    unit-test harness needs: the test module source, the test class names and the import lines.
    """
    if path is not None:
        records = read_located_records(path)
    else:
        records = locate(
            load_hub_rows(HUB_ID, None, split, dataset="classeval", local_format=LOCAL_FORMAT), f"{HUB_ID} {split}"
        )

    def make(row: dict, index: int) -> Sample:
        parts = prompt(row)
        return Sample(
            sample_id=str(row["task_id"]),
            turns=parts.turns,
            reference=row["solution_code"],
            task=TASK,
            payload={
                "task_id": row["task_id"],
                "class_name": row["class_name"],
                "skeleton": row["skeleton"],
                "test": row["test"],
                "test_classes": list(row["test_classes"]),
                "import_statement": list(row["import_statement"]),
            },
            completion_prefix=parts.completion_prefix,
        )

    return build_samples(
        records,
        str(path) if path else f"{HUB_ID} {split}",
        FIELDS,
        make,
        id_field="task_id",
        text_fields=("class_name",),
        prompt_fields=("skeleton",),
    )


def score(code: str, sample: Sample, allow_unsandboxed: bool) -> dict[str, Any]:
    """``passed``: ClassEval's unittest classes run against ``code`` in the sandbox."""
    from lade_bench.metrics.code_tasks import score_classeval

    return {"passed": score_classeval(code, sample.payload, allow_unsandboxed=allow_unsandboxed).passed}


SPEC = DatasetSpec(
    name="classeval",
    load=load,
    prompt=prompt,
    task=TASK,
    scorer=score,
    quality_columns=("passed",),
    runs_code=True,
    # The unit tests import the whole class: a completion-mode answer gets the skeleton in front.
    code=CodeAnswer(continues_prefix=False),
    config="classeval",
    source=SOURCE,
    local_format=LOCAL_FORMAT,
)
