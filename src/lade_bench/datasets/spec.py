"""The task spec: everything the suite knows about one benchmark, declared in one place.

Each dataset module (``datasets/<name>.py``) builds one :class:`DatasetSpec` as its ``SPEC``; the
registry collects them and the runner, the scorer and the plan's sandbox check read nothing else
(after lm-evaluation-harness, where a task is one file). A spec is checked when it is built, so a
dataset that forgets its scorer fails at import, naming itself, instead of silently producing rows
without a quality column. See ``docs/adding_a_dataset.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lade_bench.datasets.code_answer import CodeAnswer
from lade_bench.datasets.sample import TASKS, Sample

# (answer, sample, allow_unsandboxed) -> quality columns. ``answer`` is the decoded text, or for a
# spec with ``code`` the code read out of it. ``allow_unsandboxed`` is ``sandbox.allow_unsandboxed``
# (only scorers that run code look at it). A spec with ``reads_ending`` also passes ``ended=<bool>``.
Scorer = Callable[..., dict[str, Any]]


class DatasetSpecError(ValueError):
    """A dataset spec that cannot be registered (the message names the dataset and what is missing)."""


@dataclass(frozen=True)
class Prompt:
    """How one record is put to the model.

    Attributes:
        turns: the user message of each turn, instruction included (``Sample.turns``).
        completion_prefix: for code tasks, the raw code a base/code model continues; "" otherwise.
    """

    turns: tuple[str, ...]
    completion_prefix: str = ""


@dataclass(frozen=True)
class Unscored:
    """The explicit "no automatic metric" marker: ``scorer=Unscored("why")``.

    A dataset must say why its rows carry no quality column (MT-Bench is judged by an LLM elsewhere),
    so that a forgotten scorer can never pass for a deliberate choice.
    """

    reason: str


@dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """One benchmark: how to load it, prompt it, score it, and where its config lives.

    Attributes:
        name: registry key (the Hydra ``dataset.name``, the ``dataset`` column of every row).
        load: ``load(path, split) -> list[Sample]``; ``path`` is None for the default source. Every
            record is checked with ``records.build_samples`` before any model loads.
        prompt: ``prompt(record) -> Prompt``: the instruction and text each record becomes (the
            loader builds its samples with it).
        task: the task of every sample (one of ``sample.TASKS``).
        scorer: the quality columns of one answer (see :data:`Scorer`), or ``Unscored(reason)``.
        quality_columns: the row columns ``scorer`` returns, every time (names in
            ``lade_bench.results.schema``); empty exactly when unscored.
        runs_code: answers are executed (inside ``lade_bench.sandbox``): a cell refuses to start
            where no sandbox can hold them, unless ``sandbox.allow_unsandboxed``.
        code: how the code is read out of an answer before ``scorer`` sees it; required when
            ``runs_code``, None for text tasks.
        reads_ending: the scorer is also called with ``ended=`` (False for an output cut at the
            ``max_new_tokens`` cap without a stop id): a final-answer task (GSM8K) gives a cut output
            no credit from a fallback reading of its text. False: the scorer takes three arguments.
        config: the option name of its Hydra config, ``conf/dataset/<config>.yaml``.
        source: where the default copy comes from, for messages and listings.
        local_format: what a file given as ``dataset.path`` must look like.
        splits: the splits the default source has, or None when the hub decides.
        default_split: the split used when none is given (the benchmark split).
        categories: for a benchmark made of categories (Spec-Bench), its groups, each the categories it
            holds (``{"mt_bench": ("writing", ...), "translation": ("translation",)}``), in report
            order; every sample's ``payload["category"]`` is one of them. ``dataset.categories`` picks
            groups or categories, ``dataset.per_category_limit`` caps each group. None: no categories.
        category_of_id: for a dataset with ``categories``, the category of a row's ``sample_id`` (a row
            carries its id, not its payload): how a report names the groups a cell ran
            (``registry.sample_groups``). Required exactly when ``categories`` is given.
    """

    name: str
    load: Callable[[Path | None, str], list[Sample]]
    prompt: Callable[[Mapping[str, Any]], Prompt]
    task: str
    scorer: Scorer | Unscored
    quality_columns: tuple[str, ...]
    runs_code: bool
    code: CodeAnswer | None = None
    reads_ending: bool = False
    config: str
    source: str
    local_format: str
    splits: tuple[str, ...] | None = None
    default_split: str = "test"
    categories: Mapping[str, tuple[str, ...]] | None = None
    category_of_id: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        """Refuse an incomplete spec, naming the dataset and the field to fill."""
        problems = _problems(self)
        if problems:
            raise DatasetSpecError(f"dataset {self.name!r}: " + "; ".join(problems))


def _problems(spec: DatasetSpec) -> list[str]:
    problems = []
    if not isinstance(spec.name, str) or not spec.name.strip():
        problems.append("name must be a non-blank string")
    if spec.task not in TASKS:
        problems.append(f"task {spec.task!r} is not one of {TASKS}")
    columns = spec.quality_columns
    if not isinstance(columns, tuple) or not all(isinstance(c, str) and c for c in columns):
        problems.append(f"quality_columns must be a tuple of column names, got {columns!r}")
    if isinstance(spec.scorer, Unscored):
        if not isinstance(spec.scorer.reason, str) or not spec.scorer.reason.strip():
            problems.append("Unscored needs a reason (why no automatic metric applies)")
        if spec.quality_columns:
            problems.append(f"is Unscored but declares quality columns {list(spec.quality_columns)}")
    elif not callable(spec.scorer):
        problems.append(
            f"declares no scorer (got {spec.scorer!r}): give scorer=<callable> with its quality_columns, "
            "or scorer=Unscored('why no automatic metric applies')"
        )
    elif not spec.quality_columns:
        problems.append("has a scorer but declares no quality_columns (the row columns it fills)")
    if spec.reads_ending and isinstance(spec.scorer, Unscored):
        problems.append("reads_ending=True needs a scorer (an Unscored dataset reads no answer)")
    if spec.runs_code and spec.code is None:
        problems.append("runs_code=True needs code=CodeAnswer(...): how the code is read out of an answer")
    if not isinstance(spec.config, str) or not spec.config.strip():
        problems.append("config must name its conf/dataset/<config>.yaml")
    if (spec.categories is None) != (spec.category_of_id is None):
        problems.append(
            "categories and category_of_id go together: a report names a cell's groups from its rows' sample ids"
        )
    for field_name in ("load", "prompt"):
        if not callable(getattr(spec, field_name)):
            problems.append(f"{field_name} must be callable")
    return problems
