"""Real models in bfloat16 on the batch-invariant step path: lookahead and prompt lookup equal AR (issue 68).

The prompts are MT-Bench questions (first turn) on which the committed strong-baseline results
(``paper_figures/baselines/``, bfloat16, standard path) record lookahead N5W7G7 and prompt lookup
leaving AR within the first tokens (``matches_ar`` false, checked below from those rows). On the
path, every row of a step is bit-identical to the same row alone, so both must emit AR's tokens.
Cheap on purpose (the suite is over its CPU budget): 32 new tokens, two prompts on SmolLM2, one on
Gemma-3-270M (its 262k-token head makes every step and the path's load-time check dearer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from lade_bench.datasets import load_dataset_samples, render_prompt
from lade_bench.decoding import LookaheadParams, autoregressive_generate, lookahead_generate, prompt_lookup_generate
from lade_bench.decoding.core import batch_invariant

BASELINE_ROWS = Path(__file__).resolve().parents[2] / "paper_figures" / "baselines" / "rows" / "baselines"
# model (as the committed rows name it) -> MT-Bench question ids whose first turn the standard path
# got wrong in bfloat16 with both methods.
PROMPTS = {"smollm2-135m-instruct": ("88",), "gemma3-270m": ("83",)}
NEW_TOKENS = 32
LOOKAHEAD = LookaheadParams(5, 7, 7, prompt_as_reference=True)


def _load(name: str):
    """(model on the path, its prompts' ids): the embedded model in bfloat16, its MT-Bench first turns."""
    if name == "gemma3-270m":
        from lade_bench.models.gemma3 import load_embedded_gemma3 as load

        chat = False  # a base model: completion prompts (conf/model/gemma3_270m.yaml)
    else:
        from lade_bench.models.embedded import load_embedded_smollm2 as load

        chat = True  # an instruct model: its chat template (conf/model/smollm2.yaml)
    model, tokenizer = load(dtype=torch.bfloat16)
    batch_invariant.enable(model)
    samples = {str(s.sample_id): s for s in load_dataset_samples("mt_bench")}
    return model, [render_prompt(tokenizer, samples[i], 0, [], chat=chat) for i in PROMPTS[name]]


@pytest.fixture(scope="module", params=sorted(PROMPTS))
def on_path(request):
    """(model name, model on the path, prompts): one model at a time in memory."""
    model, prompts = _load(request.param)
    return request.param, model, prompts


@pytest.mark.slow
def test_lookahead_and_prompt_lookup_equal_ar_in_bfloat16_on_the_path(on_path):
    name, model, prompts = on_path
    for question, prompt in zip(PROMPTS[name], prompts, strict=True):
        reference = autoregressive_generate(model, prompt, NEW_TOKENS).tokens
        assert lookahead_generate(model, prompt, LOOKAHEAD, NEW_TOKENS).tokens == reference, (name, question)
        assert prompt_lookup_generate(model, prompt, NEW_TOKENS).tokens == reference, (name, question)


def test_the_prompts_left_ar_on_the_standard_path():
    """Each chosen question is one where the committed bfloat16 cells (standard path) record both methods
    leaving AR early on the first turn, so the test above checks the path where it matters."""
    dtypes = {
        cell["cell_id"]: yaml.safe_load(cell["config_text"]).get("dtype")
        for cell in json.loads((BASELINE_ROWS / "cells.json").read_text(encoding="utf-8"))
    }
    rows = pd.read_parquet(
        BASELINE_ROWS / "rows.parquet",
        columns=["cell_id", "model", "dataset", "sample_id", "turn", "arm", "window", "matches_ar", "divergence_index"],
    )
    rows = rows[(rows["cell_id"].map(dtypes) == "bfloat16") & (rows["dataset"] == "mt_bench") & (rows["turn"] == 0)]
    for name, questions in PROMPTS.items():
        for question in questions:
            for arm in ("lookahead", "prompt_lookup"):
                mine = rows[(rows["model"] == name) & (rows["sample_id"] == question) & (rows["arm"] == arm)]
                mine = mine[mine["window"] == LOOKAHEAD.window] if arm == "lookahead" else mine
                left = mine[(mine["matches_ar"] == False) & (mine["divergence_index"] < NEW_TOKENS)]  # noqa: E712
                assert len(left), f"{name} question {question}: no committed bfloat16 {arm} row leaves AR early"
