"""Schema 5: a draft model's forwards and time are columns (the assisted arm); other arms leave them null."""

from __future__ import annotations

from lade_bench.results import SCHEMA_VERSION, CellWriter, load_rows
from lade_bench.results.schema import COLUMNS_BY_NAME, upgrade_row, validate_row

from .results_helpers import make_row

ADDED = ("draft_forwards", "draft_time_s")


def test_draft_columns_are_nullable_and_added_in_version_5(tmp_path):
    assert SCHEMA_VERSION >= 5
    assert all(COLUMNS_BY_NAME[name].added_in == 5 for name in ADDED)
    assert validate_row(make_row())["draft_forwards"] is None
    writer = CellWriter(tmp_path)
    writer.append(make_row(arm="assisted", draft_forwards=7, draft_time_s=0.25))
    writer.finalize()
    rows = load_rows(tmp_path)
    assert (int(rows["draft_forwards"].iloc[0]), float(rows["draft_time_s"].iloc[0])) == (7, 0.25)
    old = {k: v for k, v in make_row().items() if k not in ADDED}
    assert upgrade_row(old)["draft_forwards"] is None and upgrade_row(old)["draft_time_s"] is None
