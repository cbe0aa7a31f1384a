"""The step-cost check's summary numbers and its Markdown page (``check.md``), from the check table.

The summary of a set of (cell, arm) checks (:func:`check_summary`): how many arms were predicted, the
median and the worst ``|predicted / measured - 1|`` (the worst with its cell), how many verdicts agree
(counted over the arms whose measured interval gives one: faster or slower; where the data cannot tell,
there is nothing to agree with) and how many predictions lie inside the measured interval. The page
states it for all the sweeps, then per sweep with the table of its arms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from lade_bench import stats
from lade_bench.report.step_cost_check import MATCH_KEY
from lade_bench.report.tables import fmt, fmt_speedup


@dataclass(frozen=True)
class CheckSummary:
    """What a set of checks says (see the module docstring)."""

    arms: int
    predicted: int
    median_abs_error: float
    worst_error: float
    worst_cell: str
    verdicts: int
    agree: int
    intervals: int
    inside: int
    readings: tuple[tuple[str, int], ...] = ()

    def lines(self) -> list[str]:
        """The summary as Markdown list items."""
        if not self.predicted:
            return [f"- predicted: 0 of {self.arms} arms"]
        rest = " (the rest listed with the reason)" if self.predicted < self.arms else ""
        read = "; ".join(f"{text}: {count}" for text, count in self.readings)
        return [
            f"- predicted: {self.predicted} of {self.arms} arms{rest}",
            f"- median |predicted / measured − 1|: {100 * self.median_abs_error:.1f}%",
            f"- worst: {100 * self.worst_error:+.1f}% ({self.worst_cell})",
            f"- verdicts agree: {self.agree} of {self.verdicts} (arms whose measured interval says faster or slower)",
            f"- prediction inside the measured 95% interval: {self.inside} of {self.intervals}",
            *([f"- outside it, what the rows show: {read}"] if read else []),
        ]


def predicted_rows(check: pd.DataFrame) -> pd.DataFrame:
    """The arms of ``check`` the model predicted."""
    return check[check["not_predicted"].fillna("").astype(str) == ""]


def check_summary(check: pd.DataFrame) -> CheckSummary:
    """The summary of ``check`` (``report.step_cost_check.check_sweep``'s rows, any number of sweeps)."""
    done = predicted_rows(check)
    if done.empty:
        return CheckSummary(len(check), 0, math.nan, math.nan, "", 0, 0, 0, 0)
    errors = done["error"].astype(float)
    worst = done.loc[errors.abs().idxmax()]
    verdicts = done[done["measured_verdict"] != stats.VERDICT_CANNOT_TELL]
    intervals = done[done["inside_interval"].astype(str).isin(["True", "False"])]
    return CheckSummary(
        arms=len(check),
        predicted=len(done),
        median_abs_error=float(errors.abs().median()),
        worst_error=float(worst["error"]),
        worst_cell=cell_name(worst),
        verdicts=len(verdicts),
        agree=int((verdicts["verdicts_agree"].astype(str) == "True").sum()),
        intervals=len(intervals),
        inside=int((intervals["inside_interval"].astype(str) == "True").sum()),
        readings=tuple((str(k), int(v)) for k, v in done.loc[done["reading"] != "", "reading"].value_counts().items()),
    )


def cell_name(rec: Mapping) -> str:
    """``spec_bench: smollm2-135m-instruct, qa, Lookahead N5W7G7 noref`` (sweep: model, dataset or group, arm)."""
    where = rec["group"] if isinstance(rec["group"], str) and rec["group"] else rec["dataset"]
    setting = f" {rec['setting']}" if isinstance(rec["setting"], str) and rec["setting"] else ""
    mode = f", {rec['mode']}" if rec["mode"] != stats.EAGER else ""
    dtype = f", {rec['dtype']}" if rec["dtype"] and rec["dtype"] != "float32" else ""
    return f"{rec['sweep']}: {rec['model']}, {where}{dtype}{mode}, {rec['label']}{setting}"


def _basis(rec: Mapping) -> str:
    if rec["not_predicted"]:
        return ""
    grid = "KV grid" if rec["kv_measured"] == "True" else f"1 context ({int(rec['context_tokens'])})"
    ar, arm = int(rec["ar_rows_without_outside_time"]), int(rec["arm_rows_without_outside_time"])
    given = "" if rec["profile_match"] == MATCH_KEY else f"; profile {rec['profile_match']}"
    return f"{grid}; no outside time: AR {ar}, arm {arm} rows{given}"


def check_table(check: pd.DataFrame) -> pd.DataFrame:
    """One sweep's checks as display strings, one row per (cell, arm)."""
    rows = []
    for rec in check.to_dict("records"):
        where = rec["group"] if rec["group"] else rec["dataset"]
        # Say the dtype and mode where they are not the suite's default (the baselines sweep varies both).
        how = [
            part for part, usual in ((rec["dtype"], "float32"), (rec["mode"], stats.EAGER)) if part and part != usual
        ]
        rows.append(
            {
                "Model": rec["model"],
                "Dataset": where + (f" ({', '.join(how)})" if how else ""),
                "Method": rec["label"]
                + (f" {rec['setting']}" if rec["setting"] else "")
                + (" (sampling)" if rec["sampling"] else ""),
                "n": str(int(rec["n_units"])),
                "Measured (95% CI)": fmt_speedup(rec["measured"], rec["ci_low"], rec["ci_high"], rec["ci_note"]),
                "Predicted": fmt(rec["predicted"]) if not rec["not_predicted"] else rec["not_predicted"],
                "Error": f"{100 * rec['error']:+.1f}%" if not rec["not_predicted"] else "",
                "Verdict measured / predicted": (
                    f"{rec['measured_verdict']} / {rec['predicted_verdict']}" if not rec["not_predicted"] else ""
                ),
                "In CI": {"True": "yes", "False": "no"}.get(str(rec["inside_interval"]), ""),
                "AR / arm time (pred / meas)": (
                    f"{fmt(rec['ar_time_ratio'])} / {fmt(rec['arm_time_ratio'])}" if not rec["not_predicted"] else ""
                ),
                "Basis": _basis(rec),
            }
        )
    return pd.DataFrame(rows)


def check_page(check: pd.DataFrame, command: str) -> str:
    """``check.md``: the summary over every sweep of ``check``, then each sweep's summary and table."""
    check = check.assign(not_predicted=check["not_predicted"].fillna(""))
    out = [
        "# The step-cost model against every committed cell",
        "",
        "Predicted speedup (`stats.step_cost.predicted_speedup`: each arm's and AR's decode steps priced on the "
        "cell's own device profile, plus the arm's measured time outside the forwards) against the measured one "
        "(ratio of sums, 95% paired bootstrap interval over samples; per token under sampling). Error = "
        "predicted / measured − 1. AR / arm time: each side's predicted over measured summed time (the error is "
        "their quotient less one). How the model works and why it errs where it does: "
        "[docs/statistics.md](../../docs/statistics.md#the-step-cost-model). Regenerate with:",
        "",
        f"    {command}",
        "",
        "## All sweeps",
        "",
        *check_summary(check).lines(),
    ]
    for sweep, part in check.groupby("sweep", sort=False):
        out += ["", f"## {sweep}", "", *check_summary(part).lines(), "", check_table(part).to_markdown(index=False)]
    return "\n".join(out) + "\n"
