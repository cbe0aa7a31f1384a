"""SuffixDecoding at its authors' plugin defaults against vLLM's, on the committed Spec-Bench questions (issue 65).

Pairs, question by question, a fresh run of the every-method cell's settings with ``arms=[ar,suffix_decoding]``
at this suite's defaults (ArcticInference's plugin: tree depth 64, 100,000 cached requests, width 16; the
command is in ``--command``) with the committed Spec-Bench cells (``paper_figures/spec_bench/rows/spec_bench``,
whose SuffixDecoding ran vLLM's values: depth 24, 10,000 requests, width 24), and writes, per configuration,
n, accepted tokens and input tokens (cur + draft) per decode step, the share of outputs equal to AR's,
and the speedups that replaying the rows' recorded step widths on the committed CPU profile of the model
predicts (``lade_bench.stats.profile_replay``: a model of the forwards' cost, not a timing). Every
per-question number goes into the JSON (``docs/engine_bench/suffix_decoding_plugin_vs_vllm.json``), which
docs/suffix_decoding.md quotes and tests/test_docs_suffix_decoding_effect.py checks.

Usage: ``python scripts/suffix_decoding_effect.py FRESH_SWEEP_DIR --commit SHA --command "..."``
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from lade_bench.profiling.device_profile import load_profiles
from lade_bench.results.archive import read_archive_cells
from lade_bench.results.atomic import atomic_write_text
from lade_bench.results.reader import find_cell_dirs, load_rows
from lade_bench.stats.profile_replay import configuration_summary, replayed_speedup

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "paper_figures" / "spec_bench" / "rows" / "spec_bench"
OUT = ROOT / "docs" / "engine_bench" / "suffix_decoding_plugin_vs_vllm.json"
KEY = ["model", "sample_id", "turn"]


def _groups(configs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Cell id -> its Spec-Bench category group (each cell ran one)."""
    return {cell: "+".join(config["dataset"]["categories"]) for cell, config in configs.items()}


def _fresh(sweep: Path) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """The rows of the fresh sweep's finished cells (a whole category group each) and their configs."""
    rows = load_rows(sweep)
    configs = {}
    for cell in find_cell_dirs(sweep):
        if (cell / "summary.json").is_file():  # a cell still running or stopped is left out whole
            cell_id = json.loads((cell / "manifest.json").read_text())["cell_id"]
            configs[cell_id] = yaml.safe_load((cell / "config.yaml").read_text())
    return rows[rows["cell_id"].isin(configs)], configs


def _committed() -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    rows = pd.read_parquet(COMMITTED / "rows.parquet")
    configs = {cell["cell_id"]: yaml.safe_load(cell["config_text"]) for cell in read_archive_cells(COMMITTED)}
    every_method = {cell for cell, config in configs.items() if "suffix_decoding" in config["arms"]}
    return rows[rows["cell_id"].isin(every_method)], {c: configs[c] for c in every_method}


def _per_sample(row: pd.Series) -> dict[str, Any]:
    return {
        "new_tokens": int(row["new_tokens"]),
        "decode_steps": int(row["decode_steps"]),
        "accept_lengths": [int(a) for a in row["accept_lengths"]],
        "step_tokens": [int(t) for t in row["step_tokens"]],
        "matches_ar": None if pd.isna(row["matches_ar"]) else bool(row["matches_ar"]),
    }


def _summary(rows: pd.DataFrame, ar: pd.DataFrame, profile: dict[str, Any]) -> dict[str, Any]:
    return _as_recorded(configuration_summary(rows, ar["step_tokens"], profile))


def _as_recorded(summary: dict[str, float]) -> dict[str, Any]:
    """``configuration_summary`` under the names this JSON was first recorded with."""
    return {RECORDED_NAMES.get(key, key): value for key, value in summary.items()}


# The committed JSON's names for configuration_summary's keys.
RECORDED_NAMES = {
    "tau": "accepted_per_step",
    "width": "input_tokens_per_step",
    "predicted_speedup": "predicted_speedup_over_ar",
}


def _compact_lists(text: str) -> str:
    """Lists of plain numbers on one line each (the per-step lists would otherwise take a line per number)."""
    return re.sub(r"\[([\d\s,.\-]*)\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]", text)


def main() -> None:
    """Pair the fresh plugin-default rows with the committed vLLM-value rows and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fresh", type=Path, help="the fresh sweep folder (output_root/spec_bench)")
    parser.add_argument("--commit", required=True, help="the commit the fresh run ran at")
    parser.add_argument("--command", required=True, help="the command of the fresh run")
    parser.add_argument("--note", default="", help="anything about how the fresh run ran that its rows do not say")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    fresh, fresh_configs = _fresh(args.fresh)
    old, old_configs = _committed()
    profiles = {p.profile["model"]: p for p in load_profiles(COMMITTED)}
    models = sorted(set(fresh["model"]))
    samples, summary = [], {}
    for model in models:
        profile = profiles[model].profile
        arms = {
            "plugin": fresh[(fresh["model"] == model) & (fresh["arm"] == "suffix_decoding")],
            "fresh_ar": fresh[(fresh["model"] == model) & (fresh["arm"] == "ar")],
            "vllm": old[(old["model"] == model) & (old["arm"] == "suffix_decoding")],
            "ar": old[(old["model"] == model) & (old["arm"] == "ar")],
        }
        arms = {name: frame.drop_duplicates(KEY).set_index(KEY) for name, frame in arms.items()}
        keys = arms["plugin"].index.intersection(arms["vllm"].index).intersection(arms["ar"].index)
        paired = {name: frame.loc[keys] for name, frame in arms.items() if name != "fresh_ar"}
        same_ar = [
            list(arms["fresh_ar"].loc[k, "output_ids"]) == list(arms["ar"].loc[k, "output_ids"])
            for k in keys
            if k in arms["fresh_ar"].index
        ]
        groups = _groups(old_configs)
        for k in keys:
            samples.append(
                {
                    "model": model,
                    "group": groups[paired["vllm"].loc[k, "cell_id"]],
                    "sample_id": k[1],
                    "turn": int(k[2]),
                    "ar_step_tokens": [int(t) for t in paired["ar"].loc[k, "step_tokens"]],
                    "plugin": _per_sample(paired["plugin"].loc[k]),
                    "vllm": _per_sample(paired["vllm"].loc[k]),
                }
            )
        summary[model] = {
            "profile": str(profiles[model].path.relative_to(ROOT)),
            "plugin": _summary(paired["plugin"], paired["ar"], profile),
            "vllm": _summary(paired["vllm"], paired["ar"], profile),
            "predicted_plugin_over_vllm": replayed_speedup(
                paired["plugin"]["step_tokens"], paired["vllm"]["step_tokens"], profile
            ),
            "fresh_ar_equals_committed_ar": f"{sum(same_ar)}/{len(same_ar)}",
            "groups": sorted({s["group"] for s in samples if s["model"] == model}),
        }
    fresh_section = next(iter(fresh_configs.values()))["suffix_decoding"]
    old_section = next(iter(old_configs.values()))["suffix_decoding"]
    result = {
        "what": "SuffixDecoding at ArcticInference's plugin defaults (fresh run) and at vLLM's values (the "
        "committed Spec-Bench every-method cells), paired by question; speedups are predictions from the "
        "committed CPU profile of the model (decode forwards replayed, prefill excluded), not timings",
        "fresh_run": {
            "commit": args.commit,
            "command": args.command,
            "note": args.note,
            "suffix_decoding": fresh_section,
        },
        "committed_rows": {
            "archive": str(COMMITTED.relative_to(ROOT)),
            "commit": sorted({json.loads(c["manifest_text"])["git_sha"][:7] for c in read_archive_cells(COMMITTED)}),
            "suffix_decoding": old_section,
        },
        "summary": summary,
        "samples": samples,
    }
    atomic_write_text(args.out, _compact_lists(json.dumps(result, indent=1)) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
