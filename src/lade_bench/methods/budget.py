"""A method's budget: which settings of its own config section size its drafts, and the values the tuner searches.

Each drafting method declares its budget beside its settings dataclass (``methods/drafters/<name>.py``,
``declare_drafter(budget=...)``), as ``Method.budget``; ``python -m lade_bench.tune tune.methods=[...]``
searches the grid of those values (every combination) with the step-cost model (docs/tuning.md, "Tuning
every method"). The authors' defaults are among the values, so the search always ranks them too. A
grid stays small (about 12 configurations at most): every candidate runs on the search samples.

No torch here: the tune's checks read budgets before any model loads.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The largest grid a budget may declare: every candidate is a generation per search sample.
MAX_CANDIDATES = 12


class BudgetError(ValueError):
    """A budget setting or value the method cannot search (the message names it and what is allowed)."""


@dataclass(frozen=True)
class Budget:
    """The budget settings of a method's own config section and the candidate values of each.

    Attributes:
        values: setting (a field of the method's settings dataclass) -> candidate values, the authors'
            default among them; the candidates are every combination (:func:`candidate_grid`).
    """

    values: Mapping[str, tuple[Any, ...]]

    def __post_init__(self) -> None:
        if not self.values or any(len(v) == 0 for v in self.values.values()):
            raise ValueError(f"a budget needs at least one setting and one value per setting, got {dict(self.values)}")
        size = 1
        for values in self.values.values():
            size *= len(values)
        if size > MAX_CANDIDATES:
            raise ValueError(f"a budget of {size} candidates is too large to search; keep it <= {MAX_CANDIDATES}")


def candidate_grid(values: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of ``values`` (setting -> candidate values), in declaration order."""
    keys = list(values)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(values[k] for k in keys))]


def value_text(value: Any) -> str:
    """A candidate value in a reader's words: a tree given as rank paths by its size and depth, else as written."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(p, (list, tuple)) for p in value):
        return f"{len(value)}-node tree of depth {max(len(p) for p in value)}"
    return str(value)


def candidate_key(candidate: Mapping[str, Any]) -> str:
    """The candidate's name in records and tables, e.g. ``num_tokens=3 max_ngram_size=2``."""
    return " ".join(f"{setting}={value_text(value)}" for setting, value in candidate.items())


def plain(value: Any) -> Any:
    """``value`` with tuples (rank paths) as lists, as a config section and a JSON record hold it."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def subtree(paths: Sequence[Sequence[int]], max_rank: int, max_depth: int) -> tuple[tuple[int, ...], ...]:
    """The nodes of a tree template (rank paths, parents first) whose ranks are all below ``max_rank`` and
    whose depth is at most ``max_depth``: a smaller tree of the same shape (every kept node's parent is kept,
    since a parent's path is a prefix of its child's)."""
    return tuple(tuple(p) for p in paths if len(p) <= max_depth and all(r < max_rank for r in p))


def budget_values(
    method: str, budget: Budget | None, overrides: Mapping[str, Sequence[Any]] | None = None
) -> dict[str, tuple[Any, ...]]:
    """The values the tune searches for ``method``: its declared budget, each setting ``overrides`` names
    replaced by the given values (``tune.budgets.<method>``).

    Raises:
        BudgetError: the method declares no budget, or an override names a setting outside it, or lists
            no value or a value twice.
    """
    if budget is None:
        raise BudgetError(f"method {method!r} declares no budget to tune")
    values = {k: tuple(v) for k, v in budget.values.items()}
    for setting, given in (overrides or {}).items():
        if setting not in values:
            raise BudgetError(
                f"tune.budgets.{method}.{setting} is not a budget setting of {method}; use any of {list(values)}"
            )
        listed = tuple(given) if isinstance(given, (list, tuple)) else (given,)
        if not listed:
            raise BudgetError(f"tune.budgets.{method}.{setting} is empty: list at least one value")
        if len({repr(plain(v)) for v in listed}) != len(listed):
            raise BudgetError(f"tune.budgets.{method}.{setting}={plain(list(listed))} lists a value twice")
        values[setting] = listed
    return values
