"""GSM8K grade-school math: hub ``openai/gsm8k`` (config "main") or a local JSONL copy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lade_bench.datasets._sources import load_hub_rows, locate, read_located_records
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample
from lade_bench.datasets.spec import DatasetSpec, Prompt

HUB_ID = "openai/gsm8k"
HUB_CONFIG = "main"
FIELDS = ("question", "answer")
LOCAL_FORMAT = "GSM8K JSONL (grade_school_math/data/test.jsonl): question, answer ending in '#### <number>'"
TASK = "math"
SOURCE = f"hub {HUB_ID} (config {HUB_CONFIG})"

# The "#### N" form matches the gold answers, so one extractor can read model output and gold alike.
INSTRUCTION = (
    'Solve the following math problem step by step. On the last line, write the final answer as "#### <number>".'
)


def extract_gold_number(answer: str) -> str:
    """Return the final number of a GSM8K ``answer`` (the text after its last ``#### ``).

    Thousands separators are dropped ("1,450,000" -> "1450000") so that the gold compares equal
    to a model's answer written either way.
    """
    head, sep, tail = answer.rpartition("####")
    if not sep or not tail.strip():
        raise ValueError(f"GSM8K answer has no '#### <number>' line: {answer[-80:]!r}")
    return tail.strip().replace(",", "")


def prompt(row: Mapping[str, Any]) -> Prompt:
    """The step-by-step instruction (final answer as ``#### <number>``), then the question."""
    return Prompt(turns=(f"{INSTRUCTION}\n\nQuestion: {row['question']}",))


def load(path: Path | None, split: str) -> list[Sample]:
    """Load GSM8K from ``path`` or the hub split ``split``.

    GSM8K has no ids; ``sample_id`` is the row index in the split, which is the same in the hub
    copy and the upstream JSONL (both are built from the same file in the same order).
    """
    if path is not None:
        records = read_located_records(path)
    else:
        records = locate(
            load_hub_rows(HUB_ID, HUB_CONFIG, split, dataset="gsm8k", local_format=LOCAL_FORMAT), f"{HUB_ID} {split}"
        )

    def make(row: dict, index: int) -> Sample:
        gold = extract_gold_number(row["answer"])
        return Sample(
            sample_id=str(index),
            turns=prompt(row).turns,
            reference=gold,
            task=TASK,
            payload={"question": row["question"], "answer": row["answer"], "gold": gold},
        )

    return build_samples(records, str(path) if path else f"{HUB_ID} {split}", FIELDS, make, text_fields=("question",))


def score(answer: str, sample: Sample, allow_unsandboxed: bool, *, ended: bool) -> dict[str, Any]:
    """``accuracy``: 1.0 when the answer's final number equals the gold one, else 0.0; an output cut at
    the cap (``ended`` False) counts only with an explicit ``#### <number>`` (``gsm8k_correct``)."""
    from lade_bench.metrics.task_accuracy import gsm8k_correct

    return {"accuracy": float(gsm8k_correct(answer, sample.payload["answer"], ended=ended))}


SPEC = DatasetSpec(
    name="gsm8k",
    load=load,
    prompt=prompt,
    task=TASK,
    scorer=score,
    quality_columns=("accuracy",),
    runs_code=False,
    reads_ending=True,
    config="gsm8k",
    source=SOURCE,
    local_format=LOCAL_FORMAT,
)
