"""Token Recycling's loop, the authors' against our earlier one: per-sample numbers and their summary.

Reads the cells of ``python -m lade_bench.run`` runs of ``arms=[ar,token_recycling]`` (one per
configuration and state mode; their commands are in each cell's manifest, which this keeps) and writes
``docs/engine_bench/token_recycling_loop_effect.json``: per configuration, every sample's Token Recycling
row (``accept_lengths``, ``step_tokens``, ``matches_ar``, warmth) beside its AR row's ``step_tokens``, and
the summary docs/token_recycling.md quotes (:func:`summary`): n, tokens per decode step (tau, pooled),
tokens fed per decode step (width, pooled), outputs equal to AR, and the speedup over AR **predicted** by
``stats.profile_replay`` on the committed CPU device profile of the model (the recorded step widths costed
on that profile: a model of the step cost, not a timing; nothing here was timed, the host was shared).

Usage: ``python scripts/token_recycling_effect.py --profile PROFILE [--profile ...] CELL_DIR...`` (each
CELL_DIR a cell folder holding rows.jsonl, manifest.json and config.yaml; each cell's rows are costed on
the profile of its model).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from lade_bench.methods.registry import configuration_label
from lade_bench.results.atomic import atomic_write_text
from lade_bench.stats.profile_replay import configuration_summary

OUT = Path(__file__).resolve().parents[1] / "docs" / "engine_bench" / "token_recycling_loop_effect.json"
ROW_KEYS = ("sample_id", "turn", "new_tokens", "accept_lengths", "step_tokens", "matches_ar", "state_requests_seen")


def summary(rows: list[Mapping[str, Any]], profile: Mapping[str, Any]) -> dict[str, float]:
    """A configuration's numbers from its per-sample rows (each with its AR row's ``ar_step_tokens``).

    ``n``: rows; ``tau``: tokens emitted per decode step, pooled over the rows (``mean_accepted``'s
    count, the prefill excluded); ``width``: tokens fed per decode step, pooled; ``matches_ar``: share of
    rows whose output equals AR's; ``predicted_speedup``: AR's replayed decode time over Token
    Recycling's on ``profile`` (``stats.profile_replay.replayed_speedup``), a prediction, not a timing.
    """
    frame = pd.DataFrame(list(rows))
    return configuration_summary(frame, frame["ar_step_tokens"], profile)


def configuration(cell_dir: Path, profile: Mapping[str, Any]) -> dict[str, Any]:
    """One cell's configuration, its command and commit, its paired rows and their summary."""
    config = yaml.safe_load((cell_dir / "config.yaml").read_text())
    manifest = json.loads((cell_dir / "manifest.json").read_text())
    rows = [json.loads(line) for line in (cell_dir / "rows.jsonl").read_text().splitlines() if line.strip()]
    ar = {(r["sample_id"], r["turn"]): r for r in rows if r["arm"] == "ar" and not r.get("error")}
    paired = []
    for row in rows:
        if row["arm"] != "token_recycling":
            continue
        if row.get("error"):
            raise SystemExit(f"{cell_dir}: sample {row['sample_id']} turn {row['turn']} failed: {row['error']}")
        paired.append(
            {**{k: row[k] for k in ROW_KEYS}, "ar_step_tokens": ar[row["sample_id"], row["turn"]]["step_tokens"]}
        )
    section = config["token_recycling"]
    return {
        "label": configuration_label("token_recycling", section),
        "settings": section,
        "method_state": config["method_state"]["mode"],
        "model": config["model"]["name"],
        "cell_id": manifest["cell_id"],
        "git_sha": manifest["git_sha"],
        "git_dirty": manifest["git_dirty"],
        "command": manifest["command"],
        "summary": summary(paired, profile),
        "rows": paired,
    }


def main() -> None:
    """Parse the profile and cell folders, write the JSON atomically, print each summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--profile", type=Path, action="append", required=True, help="a committed device profile JSON (one per model)"
    )
    parser.add_argument("cells", type=Path, nargs="+", help="cell folders (rows.jsonl, manifest.json, config.yaml)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--note", default="", help="how the runs were made, kept in the JSON (e.g. a dirty tree's why)")
    args = parser.parse_args()
    profiles = {}
    for path in args.profile:
        profiles[json.loads(path.read_text())["model"]] = path
    configurations = []
    for cell in args.cells:
        model = yaml.safe_load((cell / "config.yaml").read_text())["model"]["name"]
        if model not in profiles:
            raise SystemExit(f"{cell}: no --profile for model {model!r} (given: {sorted(profiles)})")
        configurations.append(configuration(cell, json.loads(profiles[model].read_text())))
    document = {
        "what": "Token Recycling's default (the authors' loop) against our earlier loop, per sample; "
        "predicted_speedup is stats.profile_replay on the committed device profile, a prediction, not a timing",
        "profiles": {model: str(path) for model, path in profiles.items()},
        "note": args.note,
        "configurations": configurations,
    }
    atomic_write_text(args.out, json.dumps(document, indent=1) + "\n")
    for c in configurations:
        print(c["label"], c["method_state"], {k: round(v, 3) for k, v in c["summary"].items()})


if __name__ == "__main__":
    main()
