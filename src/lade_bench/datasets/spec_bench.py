"""Spec-Bench (Xia et al., ACL 2024 Findings): 480 questions in 13 categories, read from a local copy.

Spec-Bench is how the field compares speculative decoding methods (hemingkx/Spec-Bench,
``data/spec_bench/question.jsonl``, Apache-2.0): the 80 MT-Bench questions (8 categories of 10, both
turns) and 80 each of translation (WMT14 de-en), summarization (CNN/DailyMail), qa (Natural
Questions), math_reasoning (GSM8K) and rag (Natural Questions with retrieved passages). Its report
(``evaluation/speed.py``) has one column per group: mt_bench (the 8 MT-Bench categories),
translation, summarization, qa, math_reasoning, rag, and overall.

The questions are prompted as Spec-Bench prompts them: the turns unchanged (they carry their own
instruction, e.g. "Translate German to English: ..."), MT-Bench's turn 2 after the arm's own turn-1
answer, so speeds compare with Spec-Bench's. Quality is scored where the file has a reference (checked against
the file: translation, summarization and math_reasoning hold ``[text]``, rag ``[[answer, ...]]``, the
alternatives of one gold answer; qa and four MT-Bench categories hold none, the other MT-Bench ones judge
hints): sentence BLEU (with its counts, from which reports compute corpus BLEU) and chrF for translation,
ROUGE for summarization (as ``xsum``), GSM8K's final-number accuracy for math_reasoning, exact match and token
F1 for rag; qa and MT-Bench are unscored, each with its reason (:data:`UNSCORED`). A row's ``sample_id`` is
``<category>-<question_id>``: rows carry no category column, and the report and the Spec-Bench export
read rows only (:func:`parse_sample_id`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lade_bench.datasets._sources import LOCAL_PATH_HINT, DatasetUnavailableError, read_located_records
from lade_bench.datasets.records import build_samples
from lade_bench.datasets.sample import Sample
from lade_bench.datasets.scorers import ROUGE_COLUMNS
from lade_bench.datasets.spec import DatasetSpec, Prompt, Unscored

FIELDS = ("question_id", "category", "turns")
LOCAL_FORMAT = (
    "Spec-Bench question.jsonl (hemingkx/Spec-Bench data/spec_bench/question.jsonl): question_id, category, "
    "turns, reference (a list, or absent)"
)
SOURCE = "local files only (../shared/data/spec_bench/question.jsonl)"
TASK = "chat"
SPLITS = ("test",)

MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
# Spec-Bench's report columns (evaluation/speed.py's subtasks, "overall" aside), in its order.
GROUPS: dict[str, tuple[str, ...]] = {
    "mt_bench": MT_BENCH_CATEGORIES,
    "translation": ("translation",),
    "summarization": ("summarization",),
    "qa": ("qa",),
    "math_reasoning": ("math_reasoning",),
    "rag": ("rag",),
}
CATEGORIES = tuple(c for members in GROUPS.values() for c in members)
GROUP_OF = {category: group for group, members in GROUPS.items() for category in members}

# Why a category has no automatic quality column (reported beside its speed in the leaderboard).
UNSCORED: dict[str, Unscored] = {
    **{c: Unscored("MT-Bench: judged by an LLM (FastChat's judge) outside this suite") for c in MT_BENCH_CATEGORIES},
    "qa": Unscored("Spec-Bench's file has no reference answers for its Natural Questions qa items"),
}
# The quality columns of each scored category (every row carries all of QUALITY_COLUMNS, the others null).
SCORED_COLUMNS: dict[str, tuple[str, ...]] = {
    "translation": ("bleu", "bleu_stats", "chrf"),
    "summarization": ROUGE_COLUMNS,
    "math_reasoning": ("accuracy",),
    "rag": ("exact_match", "token_f1"),
}
# BLEU first: the first column is the one a test cell of the dataset fills (a translation fixture).
QUALITY_COLUMNS: tuple[str, ...] = tuple(dict.fromkeys(c for cols in SCORED_COLUMNS.values() for c in cols))
assert set(SCORED_COLUMNS) | set(UNSCORED) == set(CATEGORIES) and not set(SCORED_COLUMNS) & set(UNSCORED)

_ID_SEPARATOR = "-"


def turn_count(category: str) -> int:
    """How many turns a Spec-Bench question of ``category`` has: MT-Bench's two, every other category's one.

    The one statement of the rule: the question file is checked against it as it loads, and an answer
    file's records against their questions (``export.spec_bench_records``).
    """
    return 2 if category in MT_BENCH_CATEGORIES else 1


def sample_id(category: str, question_id: int) -> str:
    """The row id of a question: ``<category>-<question_id>``, e.g. ``translation-161``."""
    return f"{category}{_ID_SEPARATOR}{question_id}"


def parse_sample_id(value: str) -> tuple[str, int]:
    """``(category, question_id)`` of a Spec-Bench row id (the inverse of :func:`sample_id`).

    Raises:
        ValueError: ``value`` is not ``<category>-<integer>`` with a Spec-Bench category.
    """
    category, sep, number = str(value).rpartition(_ID_SEPARATOR)
    if not sep or category not in GROUP_OF or not number.isdigit():
        raise ValueError(
            f"{value!r} is not a Spec-Bench sample id ('<category>-<question_id>', categories {CATEGORIES})"
        )
    return category, int(number)


def prompt(row: Mapping[str, Any]) -> Prompt:
    """The turns unchanged: Spec-Bench's questions carry their own instructions."""
    return Prompt(turns=tuple(row["turns"]))


def _reference(row: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """``(reference text, gold answers)`` of a record, checked against its category's shape.

    Raises:
        ValueError: a scored category whose ``reference`` is not the shape the scorer reads.
    """
    category, reference = row["category"], row.get("reference")
    if category not in SCORED_COLUMNS:
        return None, ()
    if category == "rag":
        inner = reference[0] if isinstance(reference, list) and len(reference) == 1 else None
        golds = tuple(inner) if isinstance(inner, list) else ()
        if not golds or not all(isinstance(g, str) and g.strip() for g in golds):
            raise ValueError(f"rag needs reference [[answer, ...]] of non-blank strings, got {reference!r:.80}")
        return None, golds
    if not (
        isinstance(reference, list) and len(reference) == 1 and isinstance(reference[0], str) and reference[0].strip()
    ):
        raise ValueError(f"{category} needs reference [text] (one non-blank string), got {reference!r:.80}")
    return reference[0], (reference[0],)


def load(path: Path | None, split: str) -> list[Sample]:
    """Spec-Bench's questions from the local file ``path`` (``dataset.path``); there is no default copy.

    Every record is checked before any model loads: the fields, a known category, and for a scored
    category the reference shape its scorer reads.
    """
    if path is None:
        raise DatasetUnavailableError(
            f"dataset 'spec_bench' has no packaged copy: give Spec-Bench's question.jsonl with {LOCAL_PATH_HINT} "
            f"({LOCAL_FORMAT})"
        )

    def make(row: dict, index: int) -> Sample:
        category = row["category"]
        if category not in GROUP_OF:
            raise ValueError(f"category {category!r} is not one of Spec-Bench's: {', '.join(CATEGORIES)}")
        if not isinstance(row["question_id"], int) or isinstance(row["question_id"], bool):
            raise ValueError(f"question_id must be an integer, got {row['question_id']!r}")
        expected = turn_count(category)
        if not isinstance(row["turns"], list) or len(row["turns"]) != expected:
            found = f"{len(row['turns'])} turn(s)" if isinstance(row["turns"], list) else repr(row["turns"])[:40]
            raise ValueError(
                f"turns: {found} in a {category} question; Spec-Bench's {category} questions have {expected}"
            )
        text, golds = _reference(row)
        payload = {"question_id": row["question_id"], "category": category, "golds": golds}
        judge = row.get("reference") if category in MT_BENCH_CATEGORIES else None
        if isinstance(judge, list) and judge:
            # MT-Bench's judge references (hints for the LLM judge, unscored here), kept as mt_bench keeps
            # them: REST's leak check reads them (rest_datastore.leak.reference_texts).
            payload["references"] = tuple(str(r) for r in judge)
        return Sample(
            sample_id=sample_id(category, row["question_id"]),
            turns=prompt(row).turns,
            reference=text,
            task=TASK,
            payload=payload,
        )

    return build_samples(
        read_located_records(path), str(path), FIELDS, make, id_field="question_id", turns_field="turns"
    )


def score(answer: str, sample: Sample, allow_unsandboxed: bool, *, ended: bool) -> dict[str, Any]:
    """Every quality column, filled for the sample's category and null for the others.

    translation: sentence BLEU, its BLEU counts (for corpus BLEU) and chrF (sacrebleu); summarization:
    ROUGE (as ``xsum``); math_reasoning: GSM8K's final-number accuracy (an output cut at the cap,
    ``ended`` False, scores only an explicit ``#### <number>``: its last number is no answer); rag: exact
    match and token F1 over the gold alternatives; qa and MT-Bench: all null (:data:`UNSCORED` says why).
    """
    from lade_bench.metrics import text_match

    category = sample.payload["category"]
    golds = sample.payload["golds"]
    scores: dict[str, Any] = dict.fromkeys(QUALITY_COLUMNS)
    if category == "translation":
        scores.update(
            bleu=text_match.bleu(answer, golds),
            bleu_stats=text_match.bleu_statistics(answer, golds),
            chrf=text_match.chrf(answer, golds),
        )
    elif category == "summarization":
        from lade_bench.datasets.scorers import score_rouge

        scores.update(score_rouge(answer, sample, allow_unsandboxed))
    elif category == "math_reasoning":
        from lade_bench.metrics.task_accuracy import gsm8k_correct

        scores["accuracy"] = float(gsm8k_correct(answer, sample.reference or "", ended=ended))
    elif category == "rag":
        scores.update(exact_match=text_match.exact_match(answer, golds), token_f1=text_match.token_f1(answer, golds))
    return scores


SPEC = DatasetSpec(
    name="spec_bench",
    load=load,
    prompt=prompt,
    task=TASK,
    scorer=score,
    quality_columns=QUALITY_COLUMNS,
    runs_code=False,
    reads_ending=True,
    config="spec_bench",
    source=SOURCE,
    local_format=LOCAL_FORMAT,
    splits=SPLITS,
    categories=GROUPS,
    category_of_id=lambda value: parse_sample_id(value)[0],
)
