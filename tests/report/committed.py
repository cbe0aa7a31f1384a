"""Shared check of the committed-results tests: a table recomputed from committed rows equals the committed one."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import pytest


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
