"""Pairing rows into units: the keys every arm of a cell completed, summed per sample.

Every number of a cell is computed on the same units: the (sample, turn, repeat) keys at which
*every* arm of the cell has an error-free row (:func:`common_rows`). A sample that failed on one arm
is left out for all arms, so it cannot shift a comparison. The resampling unit of every interval is
the sample (an MT-Bench question with both its turns): :func:`per_sample_totals` sums its turns and
repeats so that they move together.

Array shapes: every per-sample input is a column of the rows frame (one entry per row).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lade_bench.methods.registry import REFERENCE, STANDARD_PATH_REFERENCE
from lade_bench.stats.modes import MODE_COLUMNS, require_one_mode

# The arm every comparison is against unless the caller names another (``baseline=``); where a cell also
# has AR on the standard step path, the faster of the two (:func:`speedup_baseline`).
BASELINE_ARM = REFERENCE
# (sample, turn, repeat): what pairs a baseline row with a method row of the same cell.
PAIR_KEY: tuple[str, ...] = ("sample_id", "turn", "repeat")
SAMPLE_KEY: tuple[str, ...] = ("sample_id", "turn")
# The resampling unit of every interval: a sample (an MT-Bench question with both its turns).
UNIT_COLUMN = "sample_id"
TOTALS_COLUMNS: tuple[str, ...] = ("sample_id", "t_base", "t_arm", "tok_base", "tok_arm", "n_pairs")


def ok_rows(rows: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """Rows without an ``error`` (errored rows carry no timing and never enter an aggregate).

    ``columns``: keep only these (None: all); cheaper than filtering first when rows hold texts and ids.
    """
    ok = rows["error"].isna()
    return rows.loc[ok] if columns is None else rows.loc[ok, columns]


def common_keys(cell_rows: pd.DataFrame) -> pd.DataFrame:
    """The (sample, turn, repeat) keys at which every arm of one cell has an error-free row.

    Returns:
        Frame with the ``PAIR_KEY`` columns, one row per key, sorted.
    """
    n_arms = cell_rows["arm"].nunique()
    good = ok_rows(cell_rows)
    if good.empty:
        return good[list(PAIR_KEY)].iloc[0:0]
    arms_per_key = good.groupby(list(PAIR_KEY), sort=True)["arm"].nunique()
    return arms_per_key[arms_per_key == n_arms].index.to_frame(index=False)


def common_rows(cell_rows: pd.DataFrame) -> pd.DataFrame:
    """Error-free rows of one cell at its :func:`common_keys`: the paired units every number uses.

    In the rows' order, renumbered from 0 (what an inner merge of the rows with :func:`common_keys` gives).
    """
    good = ok_rows(cell_rows)
    if good.empty:
        return good.reset_index(drop=True)
    # Each row's key counted in place (a transform, not a merge with the key table: every report pairs each
    # cell's rows many times, and the merge copied every column once more).
    arms_per_key = good.groupby(list(PAIR_KEY), sort=False)["arm"].transform("nunique")
    return good.loc[(arms_per_key == cell_rows["arm"].nunique()).to_numpy()].reset_index(drop=True)


def per_sample_totals(paired: pd.DataFrame, arm: str, baseline: str = BASELINE_ARM) -> pd.DataFrame:
    """Times and tokens of ``arm`` and ``baseline`` on paired rows, summed per sample over turns and repeats.

    Args:
        paired: a cell's :func:`common_rows`.
        arm: the arm compared with the baseline.
        baseline: the arm it is compared with.

    Returns:
        Frame with ``TOTALS_COLUMNS`` (``sample_id, t_base, t_arm, tok_base, tok_arm, n_pairs``, the
        last the paired keys of the sample), one row per sample, sorted by sample id; empty when
        nothing pairs.

    Raises:
        ValueError: the arm's and the baseline's rows are not all of one mode (compiled or eager).
    """
    arms = paired["arm"].to_numpy()
    at_base, at_arm = np.flatnonzero(arms == baseline), np.flatnonzero(arms == arm)
    # Only the columns the mode check reads, of the two arms' rows in the rows' order: a filter of the whole
    # frame would copy every row's texts and ids.
    kept = [paired.columns.get_loc(c) for c in ("arm", *MODE_COLUMNS) if c in paired]
    require_one_mode(paired.iloc[np.union1d(at_base, at_arm), kept], f"{arm} against {baseline}")
    merged = _paired_times(paired, at_base, at_arm)
    if merged.empty:
        return pd.DataFrame({c: [] for c in TOTALS_COLUMNS})
    # One grouped sum over the four columns (the same kernel as a named aggregation per column, a quarter
    # cheaper: this runs for every arm of every cell of every report).
    grouped = merged.groupby("sample_id", sort=True)
    out = grouped[["wall_time_s_base", "wall_time_s_arm", "new_tokens_base", "new_tokens_arm"]].sum()
    out.columns = ["t_base", "t_arm", "tok_base", "tok_arm"]
    out["n_pairs"] = grouped.size()
    return out.reset_index()


def speedup_baseline(paired: pd.DataFrame, sampled: bool, baseline: str = BASELINE_ARM) -> str:
    """The arm a cell's speedups are against: ``baseline``, except that a cell with both AR arms (``ar``
    on its step path and ``ar_standard``, AR on the standard one: a batch-invariant cell, issue 68)
    measures every speedup against the faster of the two, so the path never makes a method look faster
    by slowing its reference down. The one place that choice is made.

    Args:
        paired: the cell's :func:`common_rows` (both AR arms at the same keys).
        sampled: the cell samples; then "faster" is the lower time per generated token (the arms'
            outputs differ in length), else the lower summed wall time.
        baseline: the arm the caller compares against; only AR has a standard-path twin.

    Returns:
        ``baseline``, or ``ar_standard`` where it is AR, ``ar_standard`` has a row at every key AR has
        (units pooled over cells with and without it keep AR, which covers them all) and those rows took
        less time (a tie keeps AR).
    """
    # Most cells have no standard-path AR: nothing to choose (and this runs for every arm of every report).
    if baseline != REFERENCE or not (paired["arm"].to_numpy() == STANDARD_PATH_REFERENCE).any():
        return baseline
    arms = paired.loc[
        paired["arm"].isin([REFERENCE, STANDARD_PATH_REFERENCE]), ["arm", *PAIR_KEY, "wall_time_s", "new_tokens"]
    ]
    keys = {arm: set(map(tuple, rows[list(PAIR_KEY)].to_numpy().tolist())) for arm, rows in arms.groupby("arm")}
    if len(keys) < 2 or keys[REFERENCE] != keys[STANDARD_PATH_REFERENCE]:
        return baseline
    totals = arms.groupby("arm")[["wall_time_s", "new_tokens"]].sum()
    cost = totals["wall_time_s"] / totals["new_tokens"] if sampled else totals["wall_time_s"]
    return STANDARD_PATH_REFERENCE if cost[STANDARD_PATH_REFERENCE] < cost[REFERENCE] else REFERENCE


def _paired_times(paired: pd.DataFrame, at_base: np.ndarray, at_arm: np.ndarray) -> pd.DataFrame:
    """The inner one-to-one join on ``PAIR_KEY`` of ``paired``'s rows at positions ``at_base`` (the baseline's)
    and ``at_arm`` (the arm's), in the baseline's order: ``sample_id`` and each side's ``wall_time_s`` and
    ``new_tokens`` (suffixed ``_base`` and ``_arm``).

    What ``base.merge(arm, on=PAIR_KEY, suffixes=("_base", "_arm"), validate="one_to_one")`` gives, with the
    pairs found in a dict: a cell holds tens of rows, where the merge's own machinery is most of the cost.
    Keys with a missing part go through the merge itself (which pairs missing with missing).

    Raises:
        pandas.errors.MergeError: a key twice on one side.
    """
    keys = list(PAIR_KEY)
    at_both = np.concatenate([at_base, at_arm])
    if paired[keys].iloc[at_both].isna().to_numpy().any():
        columns = [paired.columns.get_loc(c) for c in (*keys, "wall_time_s", "new_tokens")]
        base, other = paired.iloc[at_base, columns], paired.iloc[at_arm, columns]
        return base.merge(other, on=keys, suffixes=("_base", "_arm"), validate="one_to_one")
    values = [paired[k].to_numpy() for k in keys]
    base_keys = list(zip(*(v[at_base].tolist() for v in values), strict=True))
    arm_keys = list(zip(*(v[at_arm].tolist() for v in values), strict=True))
    position = {key: i for i, key in enumerate(arm_keys)}
    if len(position) != len(arm_keys) or len(set(base_keys)) != len(base_keys):
        raise pd.errors.MergeError("Merge keys are not unique in either left or right dataset; not a one-to-one merge")
    pairs = [(at_base[i], at_arm[position[key]]) for i, key in enumerate(base_keys) if key in position]
    base_rows = np.array([i for i, _ in pairs], dtype=np.intp)
    arm_rows = np.array([j for _, j in pairs], dtype=np.intp)
    return pd.DataFrame(
        {
            "sample_id": paired["sample_id"].array.take(base_rows),
            "wall_time_s_base": paired["wall_time_s"].array.take(base_rows),
            "wall_time_s_arm": paired["wall_time_s"].array.take(arm_rows),
            "new_tokens_base": paired["new_tokens"].array.take(base_rows),
            "new_tokens_arm": paired["new_tokens"].array.take(arm_rows),
        }
    )
