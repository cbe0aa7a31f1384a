"""REST's tree budget and no-match guess on the committed Spec-Bench REST cells: the authors' rules beside ours.

For every row of the committed REST cells (``paper_figures/spec_bench/rows/spec_bench``: both embedded
models, 10 questions per Spec-Bench group, MT-Bench with both turns, 128 new tokens, greedy, the reference
datastore of the model's tokenizer) this replays the generation with the real drafter
(``decoding.drafters.rest.RestDrafter``) in each configuration of :data:`CONFIGURATIONS` (``rest.tree_budget``
and ``rest.no_match_guess``: ours as committed, the authors' budget alone, and the authors' default, their
budget with their guess of token 100 on a miss), on the row's own prompt (rendered
as the runner renders it, the turn's history being the arm's own earlier outputs) and the datastore the
cell names. Greedy verification accepts the longest tree path whose every token is the target's argmax,
and REST's greedy output is AR's token for token (the exactness grid; every committed row equals AR), so
a step accepts the longest tree path the row's own output continues with, plus the target's token
(the guess too is such a path: accepted when the output continues with it): the step widths and
accepted lengths of a generation follow from its output without running the model.
The replay is checked before anything is written: in the configuration the committed cells ran
(``most_frequent_nodes``, no guess) every step's width and accepted length must equal the committed
row's, and each ``--run NAME=FOLDER`` (a results folder of a real run on the same questions in the
configuration NAME) must equal the replay in that configuration on every finished row; any difference
stops the script.

Per configuration it reports n rows, accepted tokens per decode step and tokens fed per decode step
(pooled: sums over every decode step of every row, the prefill excluded), and the speedup over the
cell's own AR **predicted** by ``stats.profile_replay`` from the committed CPU device profile of the model
(a model of the forward cost, not a timing: the machine is shared, so nothing here is timed). It writes
the per-row numbers and the summary as JSON (``--out``, atomically), naming the commit it ran at.

Usage: ``python scripts/rest_tree_budget_effect.py --out docs/engine_bench/rest_tree_budget.json
[--run no_guess=/work/effects/B/cut/spec_bench] [--run authors=/work/effects/B2/guess/spec_bench]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import OmegaConf

from lade_bench.datasets.prompts import render_prompt
from lade_bench.decoding.drafters.rest import (
    CUT_TO_CHOICES,
    MOST_FREQUENT_NODES,
    REST_NO_MATCH_GUESS,
    RestDrafter,
    RestSettings,
    RestState,
)
from lade_bench.methods.registry import configuration_label
from lade_bench.models.loading import load_tokenizer
from lade_bench.rest_datastore.reader import load_datastore
from lade_bench.results.atomic import atomic_write_text
from lade_bench.runner.samples import samples_of
from lade_bench.stats.profile_replay import configuration_summary

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "paper_figures" / "spec_bench" / "rows" / "spec_bench"
# The configurations replayed, by name: (tree_budget, no_match_guess). Every committed REST cell ran
# `committed` (recorded without either key); `authors` is the default since issue 65.
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "committed": {"tree_budget": MOST_FREQUENT_NODES, "no_match_guess": None},
    "no_guess": {"tree_budget": CUT_TO_CHOICES, "no_match_guess": None},
    "authors": {"tree_budget": CUT_TO_CHOICES, "no_match_guess": REST_NO_MATCH_GUESS},
}
COMMITTED = "committed"


def replay(drafter: RestDrafter, prompt: list[int], output: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(step_tokens, accept_lengths)`` of a greedy generation of ``output`` (prefill first, as the rows).

    The prefill feeds the prompt and emits ``output[0]``; each decode step feeds the tree and emits its
    longest path the output continues with plus the target's next token (fewer at the token budget).
    """
    steps, accepts = [len(prompt)], [1]
    k = 1
    while k < len(output):
        tree = drafter.propose(prompt + list(output[:k]))
        paths: list[tuple[int, ...]] = [()]
        longest = 0
        for token, parent in zip(tree.tokens[1:], tree.parents[1:], strict=True):
            paths.append((*paths[parent], token))
            if tuple(output[k : k + len(paths[-1])]) == paths[-1]:
                longest = max(longest, len(paths[-1]))
        emitted = min(longest + 1, len(output) - k)
        steps.append(tree.size)
        accepts.append(emitted)
        k += emitted
    return steps, accepts


def summary(rows: pd.DataFrame, profile: dict[str, Any]) -> dict[str, float]:
    """The configuration's numbers (``stats.profile_replay.configuration_summary``) against its AR rows."""
    return configuration_summary(rows, rows["ar_step_tokens"], profile)


def real_rows(run: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The finished REST rows of a real run's cells, by (model, sample id, turn)."""
    found: dict[tuple[str, str, int], dict[str, Any]] = {}
    for path in sorted(run.glob("*/rows.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["arm"] == "rest" and row["error"] is None:
                found[(row["model"], row["sample_id"], int(row["turn"]))] = row
    return found


def main() -> None:
    """Replay every committed REST row at both budgets, check, summarise and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="NAME=FOLDER",
        help=f"a real run's results folder in the configuration NAME (one of {', '.join(CONFIGURATIONS)})",
    )
    args = parser.parse_args()
    runs: dict[str, Path] = {}
    for given in args.run:
        name, _, folder = given.partition("=")
        if name not in CONFIGURATIONS or not folder:
            parser.error(f"--run {given!r}: use NAME=FOLDER with NAME one of {', '.join(CONFIGURATIONS)}")
        runs[name] = Path(folder)
    rows = pd.read_parquet(ARCHIVE / "rows.parquet")
    cells = {c["cell_id"]: c for c in json.loads((ARCHIVE / "cells.json").read_text())}
    real = {name: real_rows(folder) for name, folder in runs.items()}
    real_checked = dict.fromkeys(runs, 0)
    configurations: list[dict[str, Any]] = []
    for model in sorted(rows[rows.arm == "rest"].model.unique()):
        (profile_path,) = (ARCHIVE / "device_profiles").glob(f"*--{model}--*.json")
        profile = json.loads(profile_path.read_text())
        generations: list[dict[str, Any]] = []
        for cell_id, group in rows[(rows.arm == "rest") & (rows.model == model)].groupby("cell_id"):
            cfg = OmegaConf.create(cells[cell_id]["config_text"])
            data = cfg.dataset
            samples = {s.sample_id: s for s in samples_of(data.name, data)}
            tokenizer = load_tokenizer(cfg.model, cache_dir=cfg.model_cache_dir)
            state = RestState(load_datastore(cfg.rest.datastore))
            section = {
                k: cfg.rest[k] for k in ("datastore", "max_token_span", "num_draft", "max_matches", "draft_length")
            }
            drafters = {name: RestDrafter(state, RestSettings(**section, **c)) for name, c in CONFIGURATIONS.items()}
            ar = rows[(rows.cell_id == cell_id) & (rows.arm == "ar")].set_index(["sample_id", "turn"])
            history: dict[str, list[tuple[str, str]]] = {}
            for _, row in group.sort_values(["sample_id", "turn"]).iterrows():
                sample, turn = samples[row.sample_id], int(row.turn)
                prompt = render_prompt(
                    tokenizer,
                    sample,
                    turn,
                    history.setdefault(row.sample_id, []),
                    chat=cfg.model.chat,
                    system_prompt=cfg.model.system_prompt,
                )
                output = [int(t) for t in row.output_ids]
                record: dict[str, Any] = {
                    "sample_id": row.sample_id,
                    "turn": turn,
                    "matches_ar": bool(row.matches_ar),
                    "ar_step_tokens": [int(t) for t in ar.loc[(row.sample_id, row.turn), "step_tokens"]],
                }
                for name, drafter in drafters.items():
                    steps, accepts = replay(drafter, prompt, output)
                    record[name] = {"step_tokens": steps, "accept_lengths": accepts}
                committed = {
                    "step_tokens": [int(t) for t in row.step_tokens],
                    "accept_lengths": [int(t) for t in row.accept_lengths],
                }
                if record[COMMITTED] != committed:
                    raise SystemExit(f"{model} {row.sample_id} turn {turn}: the replay differs from the committed row")
                for name, found in real.items():
                    fresh = found.get((model, row.sample_id, turn))
                    if fresh is None:
                        continue
                    ran = {"step_tokens": fresh["step_tokens"], "accept_lengths": fresh["accept_lengths"]}
                    if record[name] != ran or fresh["output_ids"] != output or not fresh["matches_ar"]:
                        raise SystemExit(
                            f"{model} {row.sample_id} turn {turn}: the replay differs from the real run at {name}"
                        )
                    real_checked[name] += 1
                generations.append(record)
                history[row.sample_id].append((sample.turns[turn], row.output_text))
        for name, chosen in CONFIGURATIONS.items():
            per_row = [
                {
                    "sample_id": g["sample_id"],
                    "turn": g["turn"],
                    "matches_ar": g["matches_ar"],
                    "ar_step_tokens": g["ar_step_tokens"],
                    **g[name],
                }
                for g in generations
            ]
            numbers = summary(pd.DataFrame(per_row), profile)
            configurations.append(
                {
                    "model": model,
                    "configuration": name,
                    **chosen,
                    "label": configuration_label("rest", {**section, **chosen}),
                    "profile": str(profile_path.relative_to(ROOT)),
                    "summary": numbers,
                    "rows": per_row,
                }
            )
            print(model, name, json.dumps(numbers))
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    result = {
        "what": "REST's tree_budget and no_match_guess on the committed Spec-Bench REST cells: each row replayed "
        "with the real drafter in each configuration; widths and accepted lengths, and the speedup over AR "
        "predicted from the committed CPU profile (not a timing)",
        "commit": commit.stdout.strip(),
        "command": "python scripts/rest_tree_budget_effect.py --out docs/engine_bench/rest_tree_budget.json"
        + "".join(f" --run {given}" for given in args.run),
        "archive": str(ARCHIVE.relative_to(ROOT)),
        "replay_checked": {
            "committed_rows": sum(c["summary"]["n"] for c in configurations if c["configuration"] == COMMITTED),
            "real_run_rows": real_checked,
        },
        "configurations": configurations,
    }
    atomic_write_text(args.out, json.dumps(result, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
