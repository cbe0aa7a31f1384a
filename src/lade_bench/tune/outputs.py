"""What a tune leaves behind: the preset, the JSON record of every configuration, the held-out table.

Every file is written atomically (``results.atomic``): a kill never leaves half a preset or record.
The preset is a plain ``lookahead`` group file, so ``python -m lade_bench.run lookahead=tuned/<name>``
loads it; its comment header says where it came from, on which samples, and how it did against AR
and prompt lookup on the held-out samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench.report.table_format import to_markdown
from lade_bench.report.tune_figure import TUNE_RECORD
from lade_bench.results.atomic import atomic_write_json, atomic_write_text
from lade_bench.tune.config import PRESET_SUBDIR, TuneConfigError
from lade_bench.tune.validate import SPLIT_HELDOUT, HeldoutResult, WinnerChoice

HELDOUT_MD = "heldout.md"
HELDOUT_CSV = "heldout.csv"
RECORD_VERSION = 1
# The preset's header line naming the tune folder that wrote it (checked before overwriting).
_ORIGIN_PREFIX = "# tune folder: "


def preset_path(conf_dir: Path, name: str) -> Path:
    """``<conf_dir>/lookahead/tuned/<name>.yaml``: the ``lookahead`` option ``tuned/<name>``."""
    return conf_dir.joinpath(*PRESET_SUBDIR) / f"{name}.yaml"


def check_preset_writable(path: Path, tune_dir: Path, overwrite: bool) -> None:
    """Refuse to replace a preset another tune folder wrote, unless ``overwrite``.

    Raises:
        TuneConfigError: ``path`` exists and names another tune folder (or none).
    """
    if overwrite or not path.is_file():
        return
    origins = [line[len(_ORIGIN_PREFIX) :].strip() for line in path.read_text(encoding="utf-8").splitlines()
               if line.startswith(_ORIGIN_PREFIX)]  # fmt: skip
    if origins and origins[0] == str(tune_dir.resolve()):
        return
    raise TuneConfigError(
        f"the preset {path} exists and was not written by this tune folder ({tune_dir}); set tune.preset_name "
        "to another name, or tune.overwrite_preset=true to replace it"
    )


def format_speedup(record: Mapping[str, Any], value_key: str = "speedup") -> str:
    """``0.93x [0.88, 0.97] (n=10)`` or ``0.93x (n=3; no interval: 3 samples (< 10))``."""
    value = record.get(value_key)
    if value is None or not math.isfinite(float(value)):
        return "n/a"
    low, high = record.get("speedup_ci_low", record.get("ci_low")), record.get("speedup_ci_high", record.get("ci_high"))
    n = record.get("n_units")
    note = record.get("speedup_ci_note", record.get("note")) or ""
    if low is not None and high is not None and math.isfinite(float(low)) and math.isfinite(float(high)):
        return f"{float(value):.3f}x [{float(low):.3f}, {float(high):.3f}] (n={n})"
    return f"{float(value):.3f}x (n={n}; {note})" if note else f"{float(value):.3f}x (n={n})"


def heldout_records(results: Sequence[HeldoutResult], choice: WinnerChoice) -> list[dict[str, Any]]:
    """One JSON-ready record per held-out cell (every number with its n and interval or reason).

    ``arms`` and ``vs_prompt_lookup`` are on the samples ``choice`` reports (every held-out sample,
    or the report half of a split); ``arms_all_heldout`` keeps every held-out sample's, and
    ``selection_speedup`` the selection half's speedup (a split only). ``selected`` is False for the
    top-k configurations that are not the declared winner (and for reference presets).
    """
    out = []
    for result in results:
        reported = choice.reported.get(result.key, result.arms)
        lookahead = reported.get("lookahead", {})
        winner = result.rank is not None and result.key == choice.winner.key
        record = {
            "config": result.key,
            "reference": result.reference,
            "rank_in_search": result.rank,
            "ngram": result.params.ngram,
            "window": result.params.window,
            "guesses": result.params.guesses,
            "prompt_as_reference": result.params.prompt_as_reference,
            "verification": result.params.verification,
            "probe_speedup": result.probe_speedup,
            "winner": winner,
            "selected": winner,
            "selection_speedup": choice.selection_speedup.get(result.key) if result.rank is not None else None,
            "cell_dir": str(result.cell_dir),
            "mean_step_tokens": result.mean_step_tokens,
            "compression_ratio": lookahead.get("compression_ratio"),
            "arms": {arm: json_ready(rec) for arm, rec in reported.items()},
            "vs_prompt_lookup": json_ready(choice.reported_vs_prompt_lookup.get(result.key, result.vs_prompt_lookup)),
            "arms_all_heldout": {arm: json_ready(rec) for arm, rec in result.arms.items()},
        }
        out.append(record)
    return out


def heldout_table(records: Sequence[Mapping[str, Any]], rule: str | None = None) -> pd.DataFrame:
    """The held-out table as display strings (one row per held-out cell; the declared winner marked).

    With ``rule`` ``split_heldout``, a column gives each candidate's speedup on the selection half,
    and every other number is on the report half.
    """
    split = rule == SPLIT_HELDOUT
    rows = []
    for rec in records:
        arms = rec["arms"]
        lookahead = arms.get("lookahead", {})
        matches = lookahead.get("matches_ar")
        label = rec["config"] + (" (declared winner)" if rec["winner"] else " (not selected)")
        if rec.get("reference"):
            label = f"{rec['reference']}: {rec['config']} (reference preset, not a candidate)"
        row = {
            "configuration": label,
            "search rank": "-" if rec["rank_in_search"] is None else rec["rank_in_search"],
            "probe speedup": _num(rec["probe_speedup"], ".3f", suffix="x", missing="-"),
        }
        if split:
            row["selection half speedup"] = _num(rec.get("selection_speedup"), ".3f", suffix="x", missing="-")
        reported = "report half" if split else "held-out"
        row |= {
            f"{reported} lookahead vs AR": format_speedup(lookahead),
            "prompt lookup vs AR": format_speedup(arms["prompt_lookup"]) if "prompt_lookup" in arms else "not run",
            "lookahead vs prompt lookup": format_speedup(rec["vs_prompt_lookup"]),
            "tokens/step": _num(rec["compression_ratio"]),
            "input tokens/step": _num(rec["mean_step_tokens"], ".1f"),
            "matches AR": "n/a" if matches is None or not math.isfinite(float(matches)) else f"{float(matches):.0%}",
        }
        rows.append(row)
    return pd.DataFrame(rows)


def write_heldout_table(
    tune_dir: Path, records: Sequence[Mapping[str, Any]], preamble: str, rule: str | None = None
) -> tuple[Path, Path]:
    """``heldout.md`` (with a preamble saying how the winner was chosen) and ``heldout.csv`` (full precision).

    ``rule`` is ``tune.winner`` (see :func:`heldout_table`).
    """
    table = heldout_table(records, rule)
    md = tune_dir / HELDOUT_MD
    atomic_write_text(md, preamble.rstrip() + "\n\n" + to_markdown(table))
    flat = []
    for rec in records:
        row = {k: v for k, v in rec.items() if k not in ("arms", "vs_prompt_lookup", "arms_all_heldout")}
        for arm, stats in rec["arms"].items():
            for key in (
                "speedup",
                "speedup_ci_low",
                "speedup_ci_high",
                "speedup_ci_note",
                "n_units",
                "compression_ratio",
            ):
                row[f"{arm}_{key}"] = stats.get(key)
        for key, value in rec["vs_prompt_lookup"].items():
            row[f"vs_prompt_lookup_{key}"] = value
        flat.append(row)
    csv = tune_dir / HELDOUT_CSV
    atomic_write_text(csv, pd.DataFrame(flat).to_csv(index=False))
    return md, csv


def write_record(tune_dir: Path, record: Mapping[str, Any]) -> Path:
    """``tune_record.json`` (atomic; rewritten after every configuration, so a kill keeps the last state)."""
    path = tune_dir / TUNE_RECORD
    atomic_write_json(path, {"version": RECORD_VERSION, **json_ready(dict(record))})
    return path


def write_preset(path: Path, winner: HeldoutResult, header: Sequence[str], tune_dir: Path) -> Path:
    """The winner as a ``lookahead`` group file, loadable as ``lookahead=tuned/<name>``."""
    params = winner.params
    lines = [*(f"# {line}" for line in header), f"{_ORIGIN_PREFIX}{tune_dir.resolve()}"]
    lines += [
        f"ngram: {params.ngram}  # N",
        f"window: {params.window}  # W",
        f"guesses: {params.guesses}  # G",
        f"prompt_as_reference: {str(params.prompt_as_reference).lower()}",
        f"verification: {params.verification}",
    ]
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def _num(value: Any, spec: str = ".2f", suffix: str = "", missing: str = "n/a") -> str:
    return missing if value is None or not math.isfinite(float(value)) else format(float(value), spec) + suffix


def json_ready(value: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN to None, recursively."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value
