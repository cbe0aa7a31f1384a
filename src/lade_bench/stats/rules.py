"""The n rules and bootstrap settings every interval follows, and the record an estimate is.

An interval is a paired percentile bootstrap over units (samples). With fewer than
:data:`MIN_CI_UNITS` units none is computed: the point estimate stays, with its n, and a note says why
the interval is missing (:func:`interval_note`). Every estimate carries its n (:class:`Estimate`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import NamedTuple

# Defaults shared by the CLI, the notebooks and the W&B sink so their files agree byte for byte.
N_BOOT = 2000
CONFIDENCE = 0.95
BOOT_SEED = 0
# Fewest units (samples) an interval is computed from. Below it a percentile bootstrap only
# reshuffles a handful of values (3 MT-Bench questions gave "0.54 [0.54, 0.54]"), so the report shows
# the point estimate and says why there is no interval.
MIN_CI_UNITS = 10

# Why a record has no interval, besides too few units.
NOTE_BASELINE = "baseline"
NOTE_NO_PAIRS = "no paired AR rows"


def add_interval_arguments(parser: argparse.ArgumentParser, n_boot_help: str, min_ci_units_help: str) -> None:
    """Add a command's ``--n-boot`` and ``--min-ci-units`` options (defaults :data:`N_BOOT`,
    :data:`MIN_CI_UNITS`), each help text followed by its default."""
    parser.add_argument("--n-boot", type=int, default=N_BOOT, help=f"{n_boot_help} (default: %(default)s)")
    parser.add_argument(
        "--min-ci-units", type=int, default=MIN_CI_UNITS, help=f"{min_ci_units_help} (default: %(default)s)"
    )


@dataclass(frozen=True)
class IntervalSettings:
    """How intervals are computed.

    Attributes:
        n_boot: bootstrap replicates.
        confidence: two-sided coverage.
        seed: bootstrap seed (same rows and seed give the same interval).
        min_units: fewest units (samples) an interval is computed from.
    """

    n_boot: int = N_BOOT
    confidence: float = CONFIDENCE
    seed: int = BOOT_SEED
    min_units: int = MIN_CI_UNITS


class Estimate(NamedTuple):
    """A point estimate, its interval (NaN when there is none), its n and why an interval is missing.

    Attributes:
        value: the point estimate (NaN when it cannot be computed).
        low, high: interval bounds; NaN when ``note`` is set.
        n_units: independent units (samples) behind the value.
        n_pairs: paired keys behind the value.
        note: empty when there is an interval, else the reason there is none.
    """

    value: float
    low: float
    high: float
    n_units: int
    n_pairs: int
    note: str


def interval_note(n_units: int, min_units: int = MIN_CI_UNITS) -> str:
    """Why there is no interval over ``n_units`` samples; empty when there are enough."""
    if n_units >= min_units:
        return ""
    return f"no interval: {n_units} sample{'' if n_units == 1 else 's'} (< {min_units})"
