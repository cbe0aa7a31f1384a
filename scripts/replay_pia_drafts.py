"""PIA's drafts replayed on the committed Spec-Bench rows, at the authors' rule and at ours (issue 65).

PIA reads no logits: its draft at every step is a function of the tokens so far (the prompt, the output
emitted, and the trie the cell's earlier requests left). The committed Spec-Bench cells ran PIA greedy,
and every PIA output there equals AR's (``matches_ar``); greedy verification accepts the longest draft
path whose tokens are the target's next ones, i.e. the ones the committed output holds, then the next
one. So the drafts, accepted lengths and step widths a configuration would have on those questions are
those of our own ``PiaDrafter`` (``decoding/drafters/pia.py``, started by ``start_pia_request`` as the
engine starts it) driven over each committed row's prompt and output, the cell's requests in their
recorded order on one trie: no model forward is needed. The replay of the committed configuration
(``pia.draft_earlier_prompts=false``) is compared with the committed rows' own accept lengths and step
widths, row by row, and the rows it does not reproduce are listed in the output (the committed cells ran
before the squeeze counted a prompt's new trees as the authors do, the only other change since). With
``--run``, every PIA row of a real runner run at the authors' rule must equal the replay and AR's output.
Speeds are predictions: each row's step widths costed on the archive's committed CPU device profile of
its model (``stats.profile_replay``), against the same cell's AR rows, not timings.

Prompts are rendered as the runner renders them (``datasets.render_prompt``: the cell's dataset
selection, the model's chat template, a later turn's history from the arm's own earlier answer); stop
ids are the runner's (``models.loading.stop_token_ids``).

Usage (``--run``: a runner output folder at the authors' rule, whose PIA rows must equal the replay):
    python scripts/replay_pia_drafts.py paper_figures/spec_bench/rows/spec_bench \
        docs/engine_bench/pia_earlier_prompts.json --run RUN_OUTPUT_ROOT
"""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import yaml
from omegaconf import OmegaConf

from lade_bench.datasets.prompts import render_prompt
from lade_bench.decoding.drafters.pia import PiaSettings, new_pia_state, start_pia_request
from lade_bench.methods.registry import configuration_label
from lade_bench.models.loading import load_model, stop_token_ids
from lade_bench.results.atomic import atomic_write_text
from lade_bench.runner.samples import samples_of
from lade_bench.stats.profile_replay import configuration_summary


def replay_request(state: Any, settings: PiaSettings, prompt: list[int], output: list[int], stop_ids: list[int]):
    """(accept lengths, step widths) of one request, prefill first, as the engine records them."""
    run = start_pia_request(state, settings, prompt, stop_ids)
    accepted, widths = [1], [len(prompt)]  # the prefill emits the first token
    context = [*prompt, output[0]]
    while len(context) - len(prompt) < len(output):
        tree = run.drafter.propose(context)
        k = len(context) - len(prompt)  # output[k] is the next token the target emits
        depth = {0: 0}
        for node in range(1, tree.size):
            parent = tree.parents[node]
            if parent in depth and k + depth[parent] < len(output) and tree.tokens[node] == output[k + depth[parent]]:
                depth[node] = depth[parent] + 1
        emitted = output[k : k + max(depth.values()) + 1]  # the accepted path and the token after it
        accepted.append(len(emitted))
        widths.append(tree.size)
        context += emitted
    assert run.close is not None
    run.close(context)
    return accepted, widths


def replay_cell(config: dict[str, Any], rows: pd.DataFrame, draft_earlier_prompts: bool, tokenizer, stop_ids):
    """Every PIA row of one cell replayed on one trie in the recorded order: per row its numbers."""
    data = config["dataset"]
    samples = {s.sample_id: s for s in samples_of(data["name"], data)}
    settings = replace(PiaSettings(**config["pia"]), draft_earlier_prompts=draft_earlier_prompts)
    state = new_pia_state(settings)
    answers: dict[str, list[tuple[str, str]]] = {}
    out = []
    for row in rows.sort_values("state_requests_seen").itertuples():
        sample = samples[row.sample_id]
        history = answers.setdefault(row.sample_id, [])
        model = config["model"]
        prompt = render_prompt(
            tokenizer, sample, int(row.turn), history, chat=model["chat"], system_prompt=model["system_prompt"]
        )
        assert len(prompt) == row.prompt_tokens, (row.sample_id, row.turn, len(prompt), row.prompt_tokens)
        accepted, widths = replay_request(state, settings, prompt, [int(t) for t in row.output_ids], stop_ids)
        history.append((sample.turns[int(row.turn)], row.output_text))
        out.append(
            {"sample_id": row.sample_id, "turn": int(row.turn), "accept_lengths": accepted, "step_tokens": widths}
        )
    return out


def main() -> None:
    """Replay every committed PIA row at both rules; write the per-row numbers and the summaries."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", type=Path, help="a results archive (rows.parquet, cells.json, device_profiles/)")
    parser.add_argument("out", type=Path, help="the JSON to write")
    parser.add_argument("--run", type=Path, help="a runner output folder at the authors' rule, checked row by row")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = pd.read_parquet(args.archive / "rows.parquet")
    cells = {c["cell_id"]: c for c in json.loads((args.archive / "cells.json").read_text())}
    pia = rows[(rows.arm == "pia") & rows.error.isna()]
    loaded: dict[str, Any] = {}
    per_row: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    sections: dict[str, dict[str, Any]] = {}
    not_reproduced: list[str] = []
    for cell_id, cell_rows in pia.groupby("cell_id", sort=True):
        config = yaml.safe_load(cells[cell_id]["config_text"])
        model = str(cell_rows.model.iloc[0])
        if model not in loaded:
            weights, tokenizer = load_model(
                OmegaConf.create(config["model"]), torch.device("cpu"), torch.float32, "sdpa"
            )
            loaded[model] = (tokenizer, stop_token_ids(weights, tokenizer))
            del weights
        sections[model] = config["pia"]
        group = config["dataset"]["categories"][0]
        committed = {(r.sample_id, int(r.turn)): r for r in cell_rows.itertuples()}
        ar = rows[(rows.arm == "ar") & (rows.cell_id == cell_id)].set_index(["sample_id", "turn"])
        for flag in (True, False):
            for entry in replay_cell(config, cell_rows, flag, *loaded[model]):
                row = committed[entry["sample_id"], entry["turn"]]
                same = entry["accept_lengths"] == [int(a) for a in row.accept_lengths] and entry["step_tokens"] == [
                    int(w) for w in row.step_tokens
                ]
                if not flag and not same:  # the committed configuration against the committed rows
                    not_reproduced.append(f"{model} {group} {entry['sample_id']} turn {entry['turn']}")
                ar_steps = ar.loc[(entry["sample_id"], entry["turn"]), "step_tokens"]
                per_row.setdefault((model, flag), []).append(
                    {
                        "group": group,
                        **entry,
                        "matches_ar": bool(row.matches_ar),
                        "ar_step_tokens": [int(t) for t in ar_steps],
                    }
                )
        print(f"{model} {group}: {len(cell_rows)} rows replayed at both rules")
    real_checked = check_real_run(args.run, per_row) if args.run else 0
    configurations = []
    for (model, flag), entries in per_row.items():
        profile = profile_path(args.archive, model)
        frame = pd.DataFrame(entries)
        configurations.append(
            {
                "model": model,
                "draft_earlier_prompts": flag,
                "label": configuration_label("pia", {**sections[model], "draft_earlier_prompts": flag}),
                "profile": str(profile),
                "summary": summary(frame, json.loads(profile.read_text())),
                "rows": entries,
            }
        )
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    result = {
        "made_by": "scripts/replay_pia_drafts.py",
        "commit": commit.stdout.strip(),
        "command": f"python scripts/replay_pia_drafts.py {args.archive} {args.out}"
        + (f" --run {args.run}" if args.run else ""),
        "replay_checked": {
            "committed_rows": len(pia),
            "committed_rows_not_reproduced_at_draft_earlier_prompts_false": not_reproduced,
            "real_run_rows_at_draft_earlier_prompts_true": real_checked,
        },
        "configurations": configurations,
    }
    atomic_write_text(args.out, json.dumps(result, separators=(",", ":")) + "\n")
    for c in configurations:
        print(c["model"], c["label"], json.dumps(c["summary"]))
    print(json.dumps(result["replay_checked"]))


def summary(rows: pd.DataFrame, profile: dict[str, Any]) -> dict[str, float]:
    """The configuration's numbers (``stats.profile_replay.configuration_summary``) against its AR rows."""
    return configuration_summary(rows, rows["ar_step_tokens"], profile)


def check_real_run(run: Path, per_row: dict[tuple[str, bool], list[dict[str, Any]]]) -> int:
    """Every PIA row of a real runner run at the authors' rule equals the replay (its model's, same
    question and turn) and AR's output; returns how many rows were checked."""
    checked = 0
    for path in sorted(run.glob("**/rows.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["arm"] != "pia":
                continue
            replayed = {(e["sample_id"], e["turn"]): e for e in per_row[row["model"], True]}
            entry = replayed[row["sample_id"], row["turn"]]
            same = row["accept_lengths"] == entry["accept_lengths"] and row["step_tokens"] == entry["step_tokens"]
            if not (same and row["matches_ar"]):
                raise SystemExit(f"{path}: {row['sample_id']} turn {row['turn']} differs from the replay")
            checked += 1
    return checked


def profile_path(archive: Path, model: str) -> Path:
    """The committed CPU device profile of ``model`` in the archive (one per model)."""
    found = [p for p in sorted((archive / "device_profiles").glob("*.json")) if f"--{model}--" in p.name]
    if len(found) != 1:
        raise SystemExit(f"no single device profile for {model} in {archive}/device_profiles: {found}")
    return found[0]


if __name__ == "__main__":
    main()
