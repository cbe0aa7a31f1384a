"""MBPP basic Python problems: hub ``google-research-datasets/mbpp`` (config "full") or local JSONL."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lade_bench.datasets._sources import load_hub_rows, locate, read_located_records
from lade_bench.datasets.code_answer import CodeAnswer
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample
from lade_bench.datasets.spec import DatasetSpec, Prompt

HUB_ID = "google-research-datasets/mbpp"
HUB_CONFIG = "full"
FIELDS = ("task_id", "text", "code", "test_list", "test_setup_code", "challenge_test_list")
LOCAL_FORMAT = "MBPP JSONL (hub 'full' schema): task_id, text, code, test_list, test_setup_code, ..."
TASK = "code"
SOURCE = f"hub {HUB_ID} (config {HUB_CONFIG})"


def prompt(row: Mapping[str, Any]) -> Prompt:
    """The original MBPP wording for chat; the bigcode docstring form for completion.

    Chat: the task plus the asserts the code must pass, which also fix the function name.
    Completion prefix: the docstring form used by bigcode-evaluation-harness (task and first assert
    inside triple quotes) that a base code model continues.
    """
    tests = list(row["test_list"])
    instruction = (
        f"You are an expert Python programmer, and here is your task: {row['text']} "
        "Your code should pass these tests:\n\n" + "\n".join(tests) + "\n\n"
        "Reply with the code in a ```python code block."
    )
    return Prompt(turns=(instruction,), completion_prefix=f'"""\n{row["text"]}\n{tests[0]}\n"""\n')


def load(path: Path | None, split: str) -> list[Sample]:
    """Load MBPP from ``path`` or the hub split ``split`` (prompts: see :func:`prompt`)."""
    if path is not None:
        records = read_located_records(path)
    else:
        records = locate(
            load_hub_rows(HUB_ID, HUB_CONFIG, split, dataset="mbpp", local_format=LOCAL_FORMAT), f"{HUB_ID} {split}"
        )

    def make(row: dict, index: int) -> Sample:
        parts = prompt(row)
        return Sample(
            sample_id=str(row["task_id"]),
            turns=parts.turns,
            reference=row["code"],
            task=TASK,
            payload={
                "task_id": row["task_id"],
                "test_list": list(row["test_list"]),
                "test_setup_code": row["test_setup_code"],
                "challenge_test_list": list(row["challenge_test_list"]),
            },
            completion_prefix=parts.completion_prefix,
        )

    return build_samples(
        records, str(path) if path else f"{HUB_ID} {split}", FIELDS, make, id_field="task_id", text_fields=("text",)
    )


def score(code: str, sample: Sample, allow_unsandboxed: bool) -> dict[str, Any]:
    """``passed``: the MBPP asserts run against ``code`` in the sandbox."""
    from lade_bench.metrics.code_tasks import score_mbpp

    return {"passed": score_mbpp(code, sample.payload, allow_unsandboxed=allow_unsandboxed).passed}


SPEC = DatasetSpec(
    name="mbpp",
    load=load,
    prompt=prompt,
    task=TASK,
    scorer=score,
    quality_columns=("passed",),
    runs_code=True,
    # The asserts need whole definitions: a completion-mode answer gets the docstring prefix in front.
    code=CodeAnswer(continues_prefix=False),
    config="mbpp",
    source=SOURCE,
    local_format=LOCAL_FORMAT,
)
