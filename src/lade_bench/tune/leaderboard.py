"""The tuned leaderboard: every tuned method at its authors' defaults and at its tuned settings for this device.

One row per method: each configuration's measured speedup over AR on the held-out samples with its paired
95% interval (or the reason there is none) and n beside it, the step-cost model's prediction from the same
rows, and the search's prediction that declared the tuned settings. Written by the methods tune
(``methods_tune``) atomically as Markdown and CSV beside its record; every number is in the record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench import stats
from lade_bench.methods import method_label
from lade_bench.methods.budget import candidate_key, plain
from lade_bench.report.table_format import to_markdown
from lade_bench.results.atomic import atomic_write_text
from lade_bench.tune.budget_search import candidate_evidence
from lade_bench.tune.outputs import format_speedup

LEADERBOARD_MD = "leaderboard.md"
LEADERBOARD_CSV = "leaderboard.csv"


def speedup_text(entry: Mapping[str, Any]) -> str:
    """A held-out configuration's measured speedup, interval and n, e.g. ``1.21x [1.10, 1.33] (n=12)``."""
    return format_speedup(
        {
            "speedup": entry.get("speedup"),
            "ci_low": entry.get("ci_low"),
            "ci_high": entry.get("ci_high"),
            "n_units": entry.get("n_units"),
            "note": entry.get("ci_note"),
        }
    )


def _ratio(value: Any) -> str:
    return f"{float(value):.3f}x" if value is not None and math.isfinite(float(value)) else "n/a"


def leaderboard_table(record: Mapping[str, Any]) -> pd.DataFrame:
    """The leaderboard's rows (one per method) from a methods tune's record."""
    rows = []
    for name, per in record["heldout"]["methods"].items():
        defaults, tuned, winner = per["defaults"], per["tuned"], record["winners"][name]
        rows.append(
            {
                "Method": method_label(name),
                "Defaults": defaults["key"],
                "Defaults: measured vs AR": speedup_text(defaults),
                "Defaults: predicted": _ratio(defaults.get("predicted_speedup")),
                "Tuned": tuned["key"] + (" (= defaults)" if winner.get("defaults") else ""),
                "Tuned: measured vs AR": speedup_text(tuned),
                "Tuned: predicted": _ratio(tuned.get("predicted_speedup")),
                "Search prediction": f"{_ratio(winner.get('predicted_speedup'))} (n={winner.get('samples')})",
            }
        )
    return pd.DataFrame(rows)


def heldout_methods(
    rows: Mapping[str, pd.DataFrame],
    methods: Sequence[str],
    sample_ids: Sequence[str],
    profile: Mapping[str, Any],
    configured: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method and configuration (``defaults``, ``tuned``): the settings it ran, its measured speedup over
    AR with the paired interval and n (``stats.summarize_cell`` of its held-out cell's ``rows``), and the
    step-cost prediction from the same rows on ``profile`` (``configured``: configuration -> method ->
    settings). What the leaderboard shows; recomputable from the committed held-out rows."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in methods:
        out[name] = {}
        for which, cell_rows in rows.items():
            records = {rec["arm"]: rec for rec in stats.summarize_cell(cell_rows)}
            measured = records.get(name, {})
            try:
                predicted = candidate_evidence(cell_rows, name, sample_ids, profile)
            except ValueError as err:  # a step outside the profile: no prediction, the reason kept
                predicted = {"predicted_speedup": None, "note": str(err)}
            settings = {k: plain(v) for k, v in configured[which][name].items()}
            out[name][which] = {
                "settings": settings,
                "key": candidate_key(settings),
                "speedup": _number(measured.get("speedup")),
                "ci_low": _number(measured.get("speedup_ci_low")),
                "ci_high": _number(measured.get("speedup_ci_high")),
                "ci_note": measured.get("speedup_ci_note"),
                "n_units": measured.get("n_units"),
                "predicted_speedup": predicted.get("predicted_speedup"),
                "outputs_equal_ar": predicted.get("outputs_equal_ar"),
                "tokens_per_step": predicted.get("tokens_per_step"),
                "mean_step_tokens": predicted.get("mean_step_tokens"),
            }
    return out


def _number(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


def write_leaderboard(tune_dir: Path, record: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write ``leaderboard.md`` (with a preamble saying what every column is) and ``leaderboard.csv``."""
    table = leaderboard_table(record)
    heldout = record["heldout"]
    preamble = "\n".join(
        [
            f"# Tuned leaderboard: {record['model']} on {record['dataset']} ({record['device']})",
            "",
            f"Each method at its authors' defaults and at the settings tuned for this device. Search: every "
            f"candidate of each method's declared budget on {len(record['search_sample_ids'])} search samples, its "
            f"speedup predicted by the step-cost model on the tune's device profile; {record['rule']}. Held-out: "
            f"AR and every method at its defaults (one cell) and at its tuned settings (another) on "
            f"{len(heldout['sample_ids'])} samples the search never saw, sampling {record['sampling']}, "
            f"{record['max_new_tokens']} new tokens. Measured: speedup over AR, paired 95% interval over samples "
            "(n = paired samples). Predicted: the step-cost model on the same rows and profile.",
            "",
            f"Search samples: {', '.join(map(str, record['search_sample_ids']))}. "
            f"Held-out samples: {', '.join(map(str, heldout['sample_ids']))}.",
            "",
        ]
    )
    md, csv = tune_dir / LEADERBOARD_MD, tune_dir / LEADERBOARD_CSV
    atomic_write_text(md, preamble + "\n" + to_markdown(table))
    atomic_write_text(csv, table.to_csv(index=False))
    return md, csv
