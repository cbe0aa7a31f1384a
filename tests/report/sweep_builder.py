"""Build a small *real* sweep on disk: the real engine on a tiny model, rows through CellWriter.

No mocks: every time, step count and output comes from running the decoding engine. Quality columns
are filled the way a runner would, from the real outputs: ROUGE of the space-joined output ids
against the space-joined prompt ids (a stand-in reference the tiny model partly copies), and a
deterministic "unit test" for the code dataset (the last token id is even).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import yaml
from omegaconf import OmegaConf

from lade_bench.decoding import (
    DecodeResult,
    DecodingConfigError,
    LookaheadParams,
    SamplingParams,
    autoregressive_generate,
    lookahead_generate,
    prompt_lookup_generate,
)
from lade_bench.decoding.core.params import PROMPT_LOOKUP_MAX_NGRAM, PROMPT_LOOKUP_NUM_TOKENS
from lade_bench.decoding.core.timing import model_dtype
from lade_bench.metrics.rouge import rouge_scores
from lade_bench.profiling.device_profile import (
    ProfileKey,
    default_token_counts,
    device_kind,
    device_processor,
    measure_forward_curve,
    publish_profile,
)
from lade_bench.report import aggregate
from lade_bench.results import COLUMN_NAMES, CellWriter, build_manifest, cell_id, update_index
from lade_bench.runner.plan import arm_sections, readable_cell_name
from lade_bench.runner.rows import decode_step_means

SWEEP_NAME = "unit_report"
MODEL_NAME = "tiny-llama"
ATTENTION = "sdpa"
MAX_NEW_TOKENS = 16
GREEDY = SamplingParams()
SAMPLED = SamplingParams(do_sample=True, temperature=0.7, top_p=0.9, top_k=0)
ERROR_SAMPLE = "c_err"

# Token-level prompts with repeated n-grams, so prompt-as-reference has something to find.
PROMPTS: dict[str, dict[str, list[int]]] = {
    "toy_sum": {
        "s0": [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 5, 6, 7],
        "s1": [20, 21, 22, 20, 21, 22, 23, 24, 20, 21],
        "s2": [40, 41, 42, 43, 44, 40, 41, 42, 45, 46, 40, 41],
    },
    "toy_code": {
        "c0": [60, 61, 62, 63, 60, 61, 62, 64, 60, 61],
        "c1": [80, 81, 82, 80, 81, 83, 80, 81, 82],
        ERROR_SAMPLE: [90, 91, 92, 93],
    },
}


@dataclass(frozen=True)
class CellSpec:
    """One cell of the test sweep."""

    dataset: str
    ngram: int
    window: int
    guesses: int
    prompt_as_reference: bool = True
    sampling: SamplingParams = GREEDY
    arms: tuple[str, ...] = ("ar", "lookahead")
    repeats: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


CELLS: tuple[CellSpec, ...] = (
    CellSpec("toy_sum", 3, 1, 1),
    CellSpec("toy_sum", 3, 1, 3),
    CellSpec("toy_sum", 3, 3, 1),
    CellSpec("toy_sum", 3, 3, 3, arms=("ar", "lookahead", "prompt_lookup")),
    CellSpec("toy_sum", 4, 3, 3),
    CellSpec("toy_sum", 3, 3, 3, prompt_as_reference=False),
    CellSpec("toy_code", 3, 3, 3, arms=("ar", "lookahead", "prompt_lookup"), repeats=2),
    CellSpec("toy_sum", 3, 3, 3, sampling=SAMPLED),
)


def resolved_config(spec: CellSpec) -> dict[str, Any]:
    """A resolved Hydra-like config of the cell (what the runner writes as config.yaml): every section,
    whether or not an arm of the cell reads it, as composition gives them."""
    return {
        "model": {"name": MODEL_NAME, "source": "tiny", "architecture": "llama"},
        "dataset": {"name": spec.dataset, "limit": None},
        "lookahead": {
            "ngram": spec.ngram,
            "window": spec.window,
            "guesses": spec.guesses,
            "prompt_as_reference": spec.prompt_as_reference,
            "devices": 1,
        },
        # The engine's defaults: the builder calls prompt_lookup_generate with them.
        "prompt_lookup": {"num_tokens": PROMPT_LOOKUP_NUM_TOKENS, "max_ngram_size": PROMPT_LOOKUP_MAX_NGRAM},
        "sampling": {
            "name": "sampled" if spec.sampling.do_sample else "greedy",
            "do_sample": spec.sampling.do_sample,
            "temperature": spec.sampling.temperature,
            "top_p": spec.sampling.top_p,
            "top_k": spec.sampling.top_k,
        },
        "arms": list(spec.arms),
        "seed": 0,
        "max_new_tokens": MAX_NEW_TOKENS,
        "repeats": spec.repeats,
        "device": "cpu",
        "compile": False,
        "sweep_name": SWEEP_NAME,
    }


def semantic_config(spec: CellSpec) -> dict[str, Any]:
    """The semantic config hashed into the cell id, by the runner's rule: a method's sections enter
    only when the method is among the cell's arms (``runner.plan.arm_sections``), so a cell without a
    lookahead arm hashes no lookahead shape."""
    config = resolved_config(spec)
    semantic = {"model": MODEL_NAME, "dataset": spec.dataset}
    semantic |= {key: config[key] for key in ("max_new_tokens", "arms", "repeats")}
    semantic |= arm_sections(OmegaConf.create(config), spec.arms)
    return semantic | {"sampling": {k: v for k, v in config["sampling"].items() if k != "name"}, "seed": 0}


def cell_folder_name(spec: CellSpec) -> str:
    """The cell folder's readable part, by the runner's rule (``runner.plan.readable_cell_name``): a
    method's part (lookahead's ``N3W3G3ref``) only when the method is among the cell's arms."""
    return readable_cell_name(OmegaConf.create(resolved_config(spec)), spec.arms)


def _text(ids: list[int]) -> str:
    return " ".join(f"t{i}" for i in ids)


def _generate(model: torch.nn.Module, arm: str, prompt: list[int], spec: CellSpec, seed: int, n: int) -> DecodeResult:
    params = LookaheadParams(spec.ngram, spec.window, spec.guesses, spec.prompt_as_reference)
    if arm == "ar":
        return autoregressive_generate(model, prompt, n, sampling=spec.sampling, seed=seed)
    if arm == "lookahead":
        return lookahead_generate(model, prompt, params, n, sampling=spec.sampling, seed=seed)
    if arm == "prompt_lookup":
        return prompt_lookup_generate(model, prompt, n, sampling=spec.sampling, seed=seed)
    raise ValueError(arm)


def _row(spec: CellSpec, cid: str, sample_id: str, arm: str, repeat: int, seed: int) -> dict[str, Any]:
    # Every column present (null unless set here or below), so columns added later need no change here.
    return dict.fromkeys(COLUMN_NAMES) | {
        "cell_id": cid,
        "sweep": SWEEP_NAME,
        "model": MODEL_NAME,
        "dataset": spec.dataset,
        "sample_id": sample_id,
        "turn": 0,
        "arm": arm,
        "repeat": repeat,
        "ngram": spec.ngram,
        "window": spec.window,
        "guesses": spec.guesses,
        "prompt_as_reference": spec.prompt_as_reference,
        "verification": "flat",
        "compiled": False,
        "max_new_tokens": MAX_NEW_TOKENS,
        "do_sample": spec.sampling.do_sample,
        "temperature": spec.sampling.temperature,
        "top_p": spec.sampling.top_p,
        "top_k": spec.sampling.top_k,
        "seed": seed,
    }


def run_cell(model: torch.nn.Module, spec: CellSpec, sweep_root: Path) -> Path:
    """Run one cell with the real engine and write rows, side files and the index entry."""
    semantic = semantic_config(spec)
    cid = cell_id(semantic)
    cell_dir = sweep_root / f"{cell_folder_name(spec)}-{cid}"
    writer = CellWriter(cell_dir)
    update_index(sweep_root, cid, cell_dir=cell_dir, status="running", config=semantic)
    for index, (sample_id, prompt) in enumerate(PROMPTS[spec.dataset].items()):
        seed = 1000 + index
        for repeat in range(spec.repeats):
            ar_ids: list[int] | None = None
            for arm in spec.arms:
                base = _row(spec, cid, sample_id, arm, repeat, seed)
                # The error sample's lookahead arm gets an invalid max_new_tokens: a real engine
                # failure, recorded as the runner records one (error set, measurements null).
                n = 0 if (sample_id == ERROR_SAMPLE and arm == "lookahead") else MAX_NEW_TOKENS
                try:
                    result = _generate(model, arm, prompt, spec, seed, n)
                except DecodingConfigError as exc:
                    writer.append({**base, **_error_columns(repr(exc))})
                    continue
                ids = list(result.tokens)
                if arm == "ar":
                    ar_ids = ids
                writer.append({**base, **_result_columns(spec, arm, prompt, result, ar_ids)})
    writer.finalize()
    rows = aggregate.summarize(_load(cell_dir))
    metrics = aggregate.flat_metrics(rows)
    writer.write_json("summary.json", {"status": "done", "cell_id": cid, **metrics})
    key = {"device_profile_key": profile_key_of(model).as_record()}  # as the runner records it
    writer.write_json("manifest.json", build_manifest(seeds={"global": 0}, device="cpu", extra=key))
    writer.write_text("config.yaml", yaml.safe_dump(resolved_config(spec), sort_keys=False))
    update_index(sweep_root, cid, cell_dir=cell_dir, status="done", config=semantic, summary=metrics)
    return cell_dir


def _load(cell_dir: Path):
    from lade_bench.results import load_rows

    return load_rows(cell_dir)


def _error_columns(message: str) -> dict[str, Any]:
    measured = (
        "prompt_tokens new_tokens decode_steps wall_time_s forward_time_s accept_lengths tokens_per_s "
        "compression_ratio step_tokens output_ids output_text"
    ).split()
    quality = {c: None for c in ("rouge1", "rouge2", "rougeL", "rougeLsum", "passed", "accuracy", "matches_ar")}
    return {**{c: None for c in measured}, **quality, "error": message}


def _result_columns(
    spec: CellSpec, arm: str, prompt: list[int], result: DecodeResult, ar_ids: list[int] | None
) -> dict[str, Any]:
    ids = list(result.tokens)
    text = _text(ids)
    rouge = (
        rouge_scores(text, _text(prompt))
        if spec.dataset == "toy_sum"
        else dict.fromkeys(("rouge1", "rouge2", "rougeL", "rougeLsum"))
    )
    greedy_other = arm != "ar" and not spec.sampling.do_sample
    return {
        "prompt_tokens": len(prompt),
        "new_tokens": len(ids),
        "decode_steps": result.steps,
        "wall_time_s": result.wall_time_s,
        "forward_time_s": result.forward_time_s,
        "accept_lengths": list(result.accept_lengths),
        "tokens_per_s": result.tokens_per_s,
        "compression_ratio": result.compression_ratio,
        "step_tokens": result.step_tokens,
        **decode_step_means(result),
        **rouge,
        "passed": (ids[-1] % 2 == 0) if spec.dataset == "toy_code" else None,
        "accuracy": None,
        "matches_ar": (ids == ar_ids) if greedy_other else None,
        "output_ids": ids,
        "output_text": text,
        "error": None,
    }


def build_sweep(sweep_root: Path, with_profile: bool = True) -> Path:
    """Write the whole test sweep (and its device profile) under ``sweep_root``; returns it."""
    model = tiny_test_model()
    for spec in CELLS:
        run_cell(model, spec, sweep_root)
    if with_profile:
        shapes = {(c.ngram, c.window, c.guesses) for c in CELLS}
        profile = measure_forward_curve(
            model, default_token_counts(shapes, largest=32), context_tokens=32, warmup=1, repeats=3,
            model_name=MODEL_NAME, attn_implementation=ATTENTION,
        )  # fmt: skip
        publish_profile(sweep_root, profile)
    return sweep_root


def profile_key_of(model: torch.nn.Module) -> ProfileKey:
    """The device-profile key of the test sweep's cells (the key its profile is published under)."""
    dtype = str(model_dtype(model)).removeprefix("torch.")
    cpu = torch.device("cpu")
    return ProfileKey(device_kind(cpu), MODEL_NAME, dtype, ATTENTION, processor=device_processor(cpu))


def tiny_test_model() -> torch.nn.Module:
    """The tiny llama the sweep runs on (peaky enough that n-gram guesses get accepted)."""
    from lade_bench.models import tiny_model

    return tiny_model("llama", init_scale=2.0, seed=7)


def as_model(rows: pd.DataFrame, model: str, *, sweep: str | None = None) -> pd.DataFrame:
    """A copy of ``rows`` as if run on another model (and sweep): new names and cell ids, same measurements.

    For figures and tables that must keep models (or sweeps) apart: concatenated with the original,
    the result reads as a report over two models whose cells share every configuration.
    """
    suffix = f"-{model}" + (f"-{sweep}" if sweep else "")
    copy = rows.assign(model=model, cell_id=rows["cell_id"].astype(str) + suffix)
    return copy.assign(sweep=sweep) if sweep else copy


def with_speedups(rows: pd.DataFrame, speedups: dict[tuple[int, int, int], float]) -> pd.DataFrame:
    """A copy of ``rows`` whose greedy cells of shape (N, W, G) have exactly the given lookahead speedup.

    Every greedy row takes 1 s (speedup 1 for every arm) except the lookahead rows of a listed shape,
    which take ``1 / speedup`` s, so the ratio of summed wall times is the listed value whatever the
    machine timed. Sampled cells keep their measured times.
    """
    out = rows.copy()
    greedy = ~out["do_sample"].astype(bool)
    out.loc[greedy, "wall_time_s"] = 1.0
    for (ngram, window, guesses), speedup in speedups.items():
        shape = (out["ngram"] == ngram) & (out["window"] == window) & (out["guesses"] == guesses)
        out.loc[greedy & shape & (out["arm"] == "lookahead"), "wall_time_s"] = 1.0 / speedup
    return out
