"""Eager or compiled: the mode of a cell's rows, and the rule that a comparison never mixes modes.

A compiled cell (``compile=true``) runs every arm on a static KV cache with compiled forwards; an
eager cell runs them as they are. Compiling removes most of a one-token step's overhead, which is
what lookahead amortises, so a compiled arm timed against an eager AR (or the reverse) would measure
the compiler, not the method: every paired statistic refuses rows of two modes
(:func:`require_one_mode`). Rows without the ``compiled`` column (frames read from files written
before it existed, schema < 6) are eager, as every cell then was.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

EAGER = "eager"
COMPILED = "compiled"


# The row columns that say a row's mode (``compiled``, and the torch.compile mode of a compiled row).
MODE_COLUMNS: tuple[str, ...] = ("compiled", "compile_mode")


def row_compiled(rows: pd.DataFrame) -> pd.Series:
    """Per row: True for a compiled row; rows without the column, or with it null, are eager (False)."""
    if "compiled" not in rows:
        return pd.Series(False, index=rows.index, dtype=bool)
    return rows["compiled"].astype("boolean").fillna(False).astype(bool)


def require_one_mode(rows: pd.DataFrame, what: str) -> None:
    """Refuse ``rows`` that a paired statistic would compare across eager and compiled rows.

    Args:
        rows: the rows entering one comparison (an arm's and its baseline's).
        what: the comparison, for the message (e.g. ``"speedup of lookahead over ar"``).

    Raises:
        ValueError: the rows hold both compiled and eager rows.
    """
    modes = set(row_compiled(rows))
    if len(modes) > 1:
        arms = _arms_by_mode(rows)
        raise ValueError(
            f"mixing compiled and eager arms in one comparison is refused ({what}: compiled {arms[True]}, "
            f"eager {arms[False]}); compiling removes the per-step overhead that a method may amortise, so "
            "such a ratio would measure the compiler: compare cells of one mode (compile=true or false for every arm)"
        )


def mode_label(compiled: Any, compile_mode: Any = None) -> str:
    """How tables name a mode: ``"eager"``, or ``"compiled (reduce-overhead)"`` with the torch.compile mode."""
    if compiled is None or pd.isna(compiled) or not bool(compiled):
        return EAGER
    return COMPILED if compile_mode is None or pd.isna(compile_mode) else f"{COMPILED} ({compile_mode})"


def _arms_by_mode(rows: pd.DataFrame) -> dict[bool, list[str]]:
    compiled = row_compiled(rows)
    arms = rows["arm"].astype(str) if "arm" in rows else pd.Series("?", index=rows.index)
    return {flag: sorted(set(arms[compiled == flag])) for flag in (True, False)}
