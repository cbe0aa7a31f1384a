"""ClassEval class-level code generation: hub ``FudanSELab/ClassEval`` or a local JSON copy."""

from __future__ import annotations

from pathlib import Path

from lade_bench.datasets._sources import load_hub_rows, locate, read_located_records
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample

HUB_ID = "FudanSELab/ClassEval"
# Checked against the upstream data/ClassEval_data.json (the hub split is built from that file).
FIELDS = ("task_id", "skeleton", "test", "solution_code", "import_statement", "class_name", "test_classes")
LOCAL_FORMAT = "ClassEval_data.json (a JSON list): task_id, skeleton, test, solution_code, class_name, ..."
TASK = "code"
SOURCE = f"hub {HUB_ID}"


def load(path: Path | None, split: str) -> list[Sample]:
    """Load ClassEval from ``path`` or the hub split ``split``.

    The prompt is ClassEval's holistic one ("complete the class ... in the following code"); the
    payload carries what its unit-test harness needs: the test module source, the test class names
    and the import lines.
    """
    if path is not None:
        records = read_located_records(path)
    else:
        records = locate(
            load_hub_rows(HUB_ID, None, split, dataset="classeval", local_format=LOCAL_FORMAT), f"{HUB_ID} {split}"
        )

    def make(row: dict, index: int) -> Sample:
        instruction = (
            f"Please complete the class {row['class_name']} in the following code. "
            "Reply with the whole class in a ```python code block."
        )
        return Sample(
            sample_id=str(row["task_id"]),
            turns=(f"{instruction}\n\n```python\n{row['skeleton'].rstrip()}\n```",),
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
            completion_prefix=row["skeleton"],
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
