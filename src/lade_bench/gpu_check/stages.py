"""The stages of the GPU check for one embedded model: device profile, then one stage per dtype.

The first dtype (float16, the paper's) runs AR, lookahead with every preset and every other
registered method that runs on one model (prompt lookup, Jacobi, Token Recycling, ...: read from the
registry, each with its engine defaults and a cold state): the speed table and that dtype's
exactness. Each further dtype runs AR and lookahead paper_7b for exactness only. With
``flex_attention`` the first stage also runs lookahead paper_7b on a second copy of the model loaded
with ``attn_implementation="flex_attention"`` (the step mask as a BlockMask, fused kernel): the
paper's "lookahead with FlashAttention" beside the SDPA arms, on the same prompts, timed alike (its
kernel compiles during the warm-up generation). With ``compiled`` the first stage also runs the
compiled mode (``compile=true``: static KV cache, torch.compile, CUDA graphs on a GPU) as a pair of
its own, compiled AR and compiled lookahead paper_7b, paired with each other and never with an eager
arm (its rows are labelled ``<dtype> compiled``); the compile runs untimed. Each stage gets a share
of the time budget in proportion to its work.
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from lade_bench.conf import group_option, lookahead_preset
from lade_bench.datasets import load_dataset_samples, render_prompt
from lade_bench.decoding import CompiledForwards, LookaheadParams, flex_attention_available
from lade_bench.gpu_check.measure import Arm, Mismatch, find_mismatches, logits_are_finite, run_arms
from lade_bench.gpu_check.table import summary_records
from lade_bench.methods import (
    REFERENCE,
    CellFacts,
    Method,
    bind_method,
    get_method,
    methods_where,
    resolve_settings,
    runs_on_one_model,
)
from lade_bench.models.embedded import default_cache_dir
from lade_bench.models.loading import DTYPES, EMBEDDED_MODELS, stop_token_ids, tokenizer_source
from lade_bench.profiling.device_profile import sweep_profile
from lade_bench.results.atomic import atomic_write_json
from lade_bench.runner.timing import PairedRuns

# The lookahead presets measured (read from conf/lookahead/): the paper's 7B and 13B MT-Bench settings
# and the small step for compute-bound hardware.
PRESET_NAMES = ("paper_7b", "paper_13b", "cpu_small")
# The preset whose exactness is checked in every further dtype.
EXACTNESS_PRESET = "paper_7b"
# The preset the flex_attention arm runs (the paper's 7B setting, the widest step).
FLEX_PRESET = "paper_7b"
# The preset the compiled pair runs beside compiled AR.
COMPILED_PRESET = "paper_7b"
# The embedded models checked, by their conf/model/ option names.
MODEL_NAMES = ("smollm2", "gemma3_270m")


def presets() -> dict[str, LookaheadParams]:
    """The measured presets, as ``lookahead=<name>`` composes them."""
    return {name: lookahead_preset(name) for name in PRESET_NAMES}


def prompts_as_chat(model_name: str) -> bool:
    """Whether ``model=<model_name>`` renders prompts with the chat template (its config says)."""
    return bool(group_option("model", model_name)["chat"])


def other_methods() -> tuple[str, ...]:
    """The registered methods the speed stage runs besides AR and the lookahead presets: every one that
    runs on one model (``runs_on_one_model``) and must equal AR (``Method.exact``: not ar_standard, a timing
    reference of the CPU-only batch-invariant path), in registration order, so a new method needs no edit here."""
    return methods_where(lambda m: runs_on_one_model(m) and m.exact and m.name not in (REFERENCE, "lookahead"))


def model_facts(name: str, cache_dir: str | None, device: torch.device) -> CellFacts:
    """The facts of embedded model ``name`` in the model cache, as a cell's plan would give them."""
    return CellFacts(
        device=device.type,
        model_source="embedded",
        model_name=name,
        dataset="mt_bench",
        tokenizer=tokenizer_source(SimpleNamespace(source="embedded", embedded=name)),
        model_cache_dir=str(cache_dir or default_cache_dir()),
    )


def method_settings(method: Method, facts: CellFacts) -> tuple[dict[str, Any], str | None]:
    """The settings ``method`` runs with here (its engine defaults, with the words it resolves resolved
    for the model of ``facts``: REST's reference datastore) and why it cannot run (None: it can).

    Only a method that resolves a resource is asked: the one thing its defaults can lack is that
    resource (the reference datastore not built), which the check then reports rather than crash on.
    """
    if method.resolve is None:
        return {}, None
    settings = resolve_settings(method.name, None, facts)
    why = method.refuse({s: settings.get(s) for s in method.sections}, facts) if method.refuse else None
    return settings, why


def build_arms(
    model,
    stop_ids: list[int],
    max_new_tokens: int,
    presets: dict[str, LookaheadParams],
    *,
    others: bool,
    facts: CellFacts | None = None,
    skipped: dict[str, str] | None = None,
) -> dict[str, Arm]:
    """Name -> greedy generation function (registered methods); "ar" first, then (``others``) every
    method of :func:`other_methods` with its engine defaults (resolved for the model of ``facts``), then
    lookahead with each preset. A method that refuses here is left out, its reason put in ``skipped``."""
    arms: dict[str, Arm] = {REFERENCE: bind_method(REFERENCE, model, max_new_tokens, stop_ids)}
    for method in other_methods() if others else ():
        settings, why = method_settings(get_method(method), facts or CellFacts())
        if why:
            if skipped is not None:
                skipped[method] = why
            continue
        arms[method] = bind_method(method, model, max_new_tokens, stop_ids, settings)
    for name, params in presets.items():
        label = f"lookahead {name} ({params.ngram},{params.window},{params.guesses})"
        arms[label] = bind_method("lookahead", model, max_new_tokens, stop_ids, {"lookahead": params})
    return arms


def mt_bench_prompts(tokenizer, count: int, chat: bool) -> list[list[int]]:
    """First turns of the first ``count`` MT-Bench questions, rendered as the model's config renders them."""
    samples = load_dataset_samples("mt_bench", limit=count)
    return [render_prompt(tokenizer, sample, 0, [], chat=chat) for sample in samples]


def flex_arm(model, stop_ids: list[int], max_new_tokens: int) -> tuple[str, Arm]:
    """(name, generation function) of lookahead FLEX_PRESET on ``model``, a flex_attention copy."""
    params = lookahead_preset(FLEX_PRESET)
    label = f"lookahead {FLEX_PRESET} flex_attention ({params.ngram},{params.window},{params.guesses})"
    return label, bind_method("lookahead", model, max_new_tokens, stop_ids, {"lookahead": params})


def compiled_arms(model, stop_ids: list[int], max_new_tokens: int, backend: str = "inductor") -> dict[str, Arm]:
    """The compiled pair: compiled AR (the pair's "ar") and compiled lookahead COMPILED_PRESET, one
    ``CompiledForwards`` (of torch.compile ``backend``) shared, so each shape compiles once (untimed)."""
    compiled = CompiledForwards(backend=backend)
    params = lookahead_preset(COMPILED_PRESET)
    label = f"lookahead {COMPILED_PRESET} compiled ({params.ngram},{params.window},{params.guesses})"
    return {
        REFERENCE: bind_method(REFERENCE, model, max_new_tokens, stop_ids, compiled=compiled),
        label: bind_method("lookahead", model, max_new_tokens, stop_ids, {"lookahead": params}, compiled),
    }


def stage_plan(
    dtypes: list[str],
    max_new_tokens: int,
    exactness_new_tokens: int,
    *,
    flex_attention: bool = False,
    compiled: bool = False,
) -> list[dict[str, Any]]:
    """What each dtype stage runs and its amount of work (arms x tokens), which sets its time share.

    ``flex_attention``: the first (speed) stage also runs the flex_attention lookahead arm;
    ``compiled``: it also runs the compiled pair (:func:`compiled_arms`).
    """
    plan = []
    every = presets()
    for index, dtype in enumerate(dtypes):
        speed = index == 0
        chosen = every if speed else {EXACTNESS_PRESET: every[EXACTNESS_PRESET]}
        tokens = max_new_tokens if speed else exactness_new_tokens
        flex = speed and flex_attention
        pair = speed and compiled
        arms = 1 + len(other_methods()) * int(speed) + len(chosen) + int(flex) + 2 * int(pair)
        plan.append(
            {
                "dtype": dtype,
                "presets": chosen,
                "others": speed,
                "flex_attention": flex,
                "compiled": pair,
                "tokens": tokens,
                "work": arms * tokens,
            }
        )
    return plan


def check_model(name: str, args: argparse.Namespace, device: torch.device, out: Path, deadline: float) -> dict:
    """All dtype stages of one embedded model; returns its summary records and details."""
    loader = EMBEDDED_MODELS[name].load
    # A torch without flex_attention drops the arm (the table then lacks its row) rather than the check.
    flex = args.flex_attention and flex_attention_available()
    plan = stage_plan(
        args.dtypes, args.max_new_tokens, args.exactness_new_tokens, flex_attention=flex, compiled=args.compiled
    )
    records, details = [], {}
    for index, stage in enumerate(plan):
        loaded = time.monotonic()
        model, tokenizer = loader(args.cache_dir, dtype=DTYPES[stage["dtype"]], device=device)
        load_s = time.monotonic() - loaded
        prompts = mt_bench_prompts(tokenizer, args.prompts, prompts_as_chat(name))
        stop_ids = stop_token_ids(model, tokenizer)
        detail: dict[str, Any] = {"load_s": load_s, "finite_logits": logits_are_finite(model, prompts[0])}
        if index == 0:
            passes = {"repeats": args.profile_repeats, "warmup": args.profile_warmup}
            profile = sweep_profile(
                model,
                [(p.ngram, p.window, p.guesses) for p in presets().values()],
                # The model's name as cells record it (not the converted checkpoint's folder), so that
                # python -m lade_bench.predict matches this profile to a sweep's rows of the model.
                model_name=str(group_option("model", name)["name"]),
                **{key: value for key, value in passes.items() if value is not None},
            )
            profile_path = out / f"device_profile_{name}.json"
            atomic_write_json(profile_path, profile)
            detail["device_profile"] = profile_path.name
        now = time.monotonic()
        remaining_work = sum(s["work"] for s in plan[index:])
        stage_deadline = now + max(deadline - now, 0.0) * stage["work"] / remaining_work
        if stage["compiled"]:
            # Its share of the stage's time: the pair's 2 arms out of the stage's arms.
            pair_deadline = now + (stage_deadline - now) * 2 * stage["tokens"] / stage["work"]
            pair = run_arms(
                compiled_arms(model, stop_ids, stage["tokens"]), prompts, warmup=args.warmup, deadline=pair_deadline
            )
            pair_mismatches = find_mismatches(model, prompts, pair, args.margin_tolerance)
            records.extend(summary_records(name, f"{stage['dtype']} compiled", pair, pair_mismatches))
            detail["compiled"] = _run_details(pair, stage["tokens"], pair_mismatches)
            detail["compiled"]["compile_time_s"] = {
                arm: sum(r.stats.get("compile_time_s", 0.0) for r in results) for arm, results in pair.results.items()
            }
        skipped: dict[str, str] = {}
        facts = model_facts(name, args.cache_dir, device)
        arms = build_arms(
            model, stop_ids, stage["tokens"], stage["presets"], others=stage["others"], facts=facts, skipped=skipped
        )
        if skipped:
            detail["skipped"] = skipped
        flex_model = None
        if stage["flex_attention"]:
            # A second copy: the arms alternate per prompt, so switching one model's implementation
            # back and forth would be state shared between arms.
            flex_model, _ = loader(
                args.cache_dir, dtype=DTYPES[stage["dtype"]], device=device, attn_implementation="flex_attention"
            )
            label, arm = flex_arm(flex_model, stop_ids, stage["tokens"])
            arms[label] = arm
        runs = run_arms(arms, prompts, warmup=args.warmup, deadline=stage_deadline)
        mismatches = find_mismatches(model, prompts, runs, args.margin_tolerance)
        records.extend(summary_records(name, stage["dtype"], runs, mismatches))
        detail.update(_run_details(runs, stage["tokens"], mismatches))
        details[stage["dtype"]] = detail
        del model, flex_model, arms
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return {"records": records, "details": details}


def _run_details(runs: PairedRuns, max_new_tokens: int, mismatches: list[Mismatch]) -> dict[str, Any]:
    return {
        "max_new_tokens": max_new_tokens,
        "prompts_done": runs.units_done,
        "stopped_early": runs.stopped_early,
        "generations": {
            arm: [
                {
                    "new_tokens": r.new_tokens,
                    "steps": r.steps,
                    "wall_time_s": r.wall_time_s,
                    "forward_time_s": r.forward_time_s,
                    "tokens": r.tokens,
                }
                for r in results
            ]
            for arm, results in runs.results.items()
        },
        "mismatches": [vars(m) for m in mismatches],
    }


def notes(details: dict[str, dict], tolerance: float) -> list[str]:
    """Lines under the table: stages cut by the budget, non-finite logits, engine errors."""
    lines = []
    for model, per_dtype in details.items():
        for dtype, detail in per_dtype.items():
            if detail["stopped_early"]:
                lines.append(f"{model} {dtype}: the time budget stopped it after {detail['prompts_done']} prompt(s).")
            for method, why in detail.get("skipped", {}).items():
                lines.append(f"{model} {dtype}: {method} not run: {why}")
            if not detail["finite_logits"]:
                lines.append(f"{model} {dtype}: the logits overflow (inf/NaN): outputs in this dtype mean nothing.")
            errors = [m for m in detail["mismatches"] if m["engine_error"]]
            if errors:
                lines.append(
                    f"{model} {dtype}: {len(errors)} ENGINE ERROR(S): a mismatch more than {tolerance} logits "
                    "below AR's token (see gpu_check.json)."
                )
    return lines
