"""ClassEval class-level code generation: hub ``FudanSELab/ClassEval`` or a local JSON copy."""

from __future__ import annotations

from pathlib import Path

from lade_bench.datasets._sources import load_hub_rows, read_records, require_fields
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
        rows, source = read_records(path), str(path)
    else:
        rows = load_hub_rows(HUB_ID, None, split, dataset="classeval", local_format=LOCAL_FORMAT)
        source = HUB_ID
    samples = []
    for index, row in enumerate(rows):
        require_fields(row, FIELDS, source=source, index=index)
        instruction = (
            f"Please complete the class {row['class_name']} in the following code. "
            "Reply with the whole class in a ```python code block."
        )
        samples.append(
            Sample(
                sample_id=row["task_id"],
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
        )
    return samples
