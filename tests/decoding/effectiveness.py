"""How well lookahead works on the embedded SmolLM2: the cases, the measurement, the recorded numbers.

Exactness tests cannot see a lookahead branch that stopped working (every step still emits one
correct token). These cases pin the step counts the engine reaches on real prompts, so a dead window
harvest, an unconsulted pool or a lost bonus token shows up as a drop in compression.

Recording: ``python -m tests.decoding.effectiveness --write`` (from the repository root, with the
project's venv) measures every case with the current engine and rewrites ``RECORD_PATH``. Do that
only after a deliberate engine change that moves the numbers, and say why in the commit.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lade_bench.datasets import load_dataset_samples, render_prompt
from lade_bench.decoding import LookaheadParams, lookahead_generate

RECORD_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "lookahead_effectiveness.json"
MAX_NEW_TOKENS = 96
# One prompt per dataset, HumanEval/1 (HumanEval/0 ends by EOS at 90 tokens): scripts/mutation_check.py
# catches 5 of 5 mutations with it, as it did with two prompts, at half the cost.
PROMPT_OFFSET = 1
PROMPTS_PER_DATASET = 1
# HumanEval alone: its prompts repeat enough that prompt-as-reference lifts compression far above the
# window alone (1.88 against 1.43 on HumanEval/1), so each switched-off piece shows; MT-Bench's chat
# prompts separated the two by 5% (1.43 against 1.36), about the tolerance, at twice HumanEval's cost.
DATASETS: tuple[str, ...] = ("humaneval",)
# N, W, G = 5, 7, 7 (the official README's setting), window only and with prompt as reference.
CONFIGS: dict[str, LookaheadParams] = {
    "window_only": LookaheadParams(5, 7, 7, prompt_as_reference=False),
    "prompt_as_reference": LookaheadParams(5, 7, 7, prompt_as_reference=True),
}


@dataclass(frozen=True)
class Measurement:
    """Totals over the prompts of one (dataset, config) case."""

    new_tokens: int
    steps: int
    per_prompt_steps: tuple[int, ...]

    @property
    def compression(self) -> float:
        """New tokens per forward pass (prefill included), over all prompts of the case."""
        return self.new_tokens / self.steps


def case_prompts(tokenizer: Any, dataset: str) -> list[list[int]]:
    """``PROMPTS_PER_DATASET`` first-turn prompts of ``dataset`` from ``PROMPT_OFFSET`` in file order, chat-rendered."""
    samples = load_dataset_samples(dataset, limit=PROMPT_OFFSET + PROMPTS_PER_DATASET)[PROMPT_OFFSET:]
    return [render_prompt(tokenizer, sample, 0, [], chat=True) for sample in samples]


def measure(model: Any, tokenizer: Any, prompts: list[list[int]], params: LookaheadParams) -> Measurement:
    """Greedy lookahead on every prompt; step and token totals (seed 0, the engine's default)."""
    results = [
        lookahead_generate(model, prompt, params, MAX_NEW_TOKENS, eos_token_id=tokenizer.eos_token_id)
        for prompt in prompts
    ]
    return Measurement(
        new_tokens=sum(len(r.tokens) for r in results),
        steps=sum(r.steps for r in results),
        per_prompt_steps=tuple(r.steps for r in results),
    )


def read_record() -> dict[str, dict[str, dict[str, Any]]]:
    """The recorded measurements: dataset -> config -> {new_tokens, steps, compression, ...}."""
    return json.loads(RECORD_PATH.read_text())["cases"]


def _write_record() -> None:
    from lade_bench.models.embedded import load_embedded_smollm2

    model, tokenizer = load_embedded_smollm2()
    cases: dict[str, dict[str, dict[str, Any]]] = {}
    for dataset in DATASETS:
        prompts = case_prompts(tokenizer, dataset)
        for name, params in CONFIGS.items():
            m = measure(model, tokenizer, prompts, params)
            cases.setdefault(dataset, {})[name] = {
                "new_tokens": m.new_tokens,
                "steps": m.steps,
                "per_prompt_steps": list(m.per_prompt_steps),
                "compression": round(m.compression, 4),
            }
            print(dataset, name, cases[dataset][name], flush=True)
    record = {
        "how": "python -m tests.decoding.effectiveness --write: embedded SmolLM2-135M-Instruct, fp32, CPU, "
        f"greedy, seed 0, {PROMPTS_PER_DATASET} first-turn prompt(s) per dataset from index {PROMPT_OFFSET} in file "
        "order (chat template), "
        f"{MAX_NEW_TOKENS} new tokens or EOS; steps count every forward, the prefill included",
        "cases": cases,
    }
    RECORD_PATH.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {RECORD_PATH}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="measure every case and rewrite the record")
    if parser.parse_args().write:
        _write_record()
    else:
        parser.print_help()
