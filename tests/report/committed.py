"""Shared checks of the committed-results tests: tables recomputed from committed rows equal the committed ones."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pytest

from lade_bench.report.build import SUMMARY_CSV


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def assert_recomputes(recomputed: pd.DataFrame, committed: pd.DataFrame, columns: Sequence[str], key: str) -> None:
    """Row by row, ``columns`` agree: missing with missing, floats to 1e-9 relative, anything else exactly.

    ``key`` names each row in a failure (e.g. ``"arm"``). A float is compared to 1e-9 only because the
    CSV round trip may move its last digit; everything the tables print is far coarser.
    """
    assert len(recomputed) == len(committed)
    for new, old in zip(recomputed.to_dict("records"), committed.to_dict("records"), strict=True):
        for column in columns:
            a, b = new[column], old[column]
            if _missing(b):
                assert _missing(a), (new[key], column, a)
            elif isinstance(b, float):
                assert a == pytest.approx(b, rel=1e-9), (new[key], column)
            else:
                assert a == b, (new[key], column, a, b)


def assert_tables_recompute(new_tables: Path, old_tables: Path, key: str) -> None:
    """Every table of a rebuilt report's ``tables/`` equals the committed one; none missing or extra.

    Markdown and LaTeX byte for byte; the full-precision summary CSV column for column through
    :func:`assert_recomputes` (``key`` names a row in a failure).
    """
    names = sorted(p.name for p in new_tables.iterdir())
    assert names == sorted(p.name for p in old_tables.iterdir())
    for name in names:
        if name != SUMMARY_CSV:
            assert (new_tables / name).read_text() == (old_tables / name).read_text(), name
    recomputed, committed = pd.read_csv(new_tables / SUMMARY_CSV), pd.read_csv(old_tables / SUMMARY_CSV)
    assert list(recomputed.columns) == list(committed.columns)
    assert_recomputes(recomputed, committed, list(committed.columns), key=key)
