"""Engine benchmark: AR vs lookahead (several N, W, G) vs prompt lookup on the embedded model.

    python -m lade_bench.bench [--prompts 4] [--max-new-tokens 96] [--lookahead 5,7,7 5,7,7,trie] ...
    python -m lade_bench.bench --methods ar jacobi       # any registered method that runs on one model
    python -m lade_bench.bench --compile --dtype bfloat16 # the compiled mode (static cache, torch.compile)
    python -m lade_bench.bench --step-cost                # forward cost per step width, per (dtype, compile)

Arms are timed by the one timing harness (``runner.timing``: order flipped per prompt, warm-up,
pairing) in one process, so drift and noise hit every arm alike. The lookahead method runs once per
``--lookahead`` configuration. Speed is reported as ratios between arms, never as absolute
thresholds. Prints a table and writes the per-generation records plus the table as JSON under --output.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import torch
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from lade_bench import stats
from lade_bench.datasets import load_dataset_samples, render_prompt
from lade_bench.decoding import VERIFICATION_LAYOUTS, CompiledForwards, DecodeResult, LookaheadParams
from lade_bench.decoding.core import batch_invariant
from lade_bench.decoding.core.timing import model_device
from lade_bench.methods import (
    REFERENCE,
    STANDARD_PATH_REFERENCE,
    CellFacts,
    UnknownMethodError,
    bind_method,
    get_method,
    methods_where,
    resolve_settings,
    runs_on_one_model,
)
from lade_bench.metrics.speed import compression_ratio, speedup, tokens_per_s
from lade_bench.metrics.task_accuracy import match_rate
from lade_bench.models.embedded import default_cache_dir, load_embedded_smollm2
from lade_bench.models.loading import tokenizer_source
from lade_bench.profiling import default_token_counts, measure_forward_curve
from lade_bench.profiling.device_profile import device_processor
from lade_bench.results.atomic import atomic_write_json
from lade_bench.runner.timing import run_paired

Arm = Callable[[list[int]], DecodeResult]


@dataclass
class ArmSummary:
    """Aggregates of one arm over all prompts (ratios of sums, as the paper reports them).

    ``speedup_vs_ar`` is against ``speedup_baseline``: AR, or with ``ar_standard`` among the arms the
    faster of the two (:func:`speedup_reference`); ``matches_ar`` always compares with AR's tokens.
    """

    arm: str
    tokens_per_s: float
    speedup_vs_ar: float
    speedup_baseline: str
    compression_ratio: float
    outside_forward_share: float
    matches_ar: float
    tokens_per_step: float


def _bench_method(name: str) -> str:
    """A registered method that runs on one model (the bench loads nothing else)."""
    try:
        method = get_method(name)
    except UnknownMethodError as err:  # argparse shows an ArgumentTypeError's own message, with the "did you mean"
        raise argparse.ArgumentTypeError(str(err)) from None
    if not runs_on_one_model(method):
        allowed = list(methods_where(runs_on_one_model))
        raise argparse.ArgumentTypeError(f"{name!r} needs more than one model on one device; use one of {allowed}")
    return name


def parse_setting(text: str) -> tuple[str, str, Any]:
    """Parse ``SECTION.KEY=VALUE`` (``--setting``): the value as YAML reads it (numbers, booleans, text)."""
    import yaml

    key, sep, value = text.partition("=")
    section, dot, name = key.partition(".")
    if not (sep and dot and section and name):
        raise argparse.ArgumentTypeError(f"--setting {text!r}: use SECTION.KEY=VALUE, e.g. rest.datastore=PATH")
    return section, name, yaml.safe_load(value)


def resolved_bench_settings(
    methods: list[str], settings: dict[str, dict[str, Any]], cache_dir: str | None, device: str, compiled: bool
) -> dict[str, Any]:
    """``settings`` (``--setting``) with the words of the methods that resolve them (``Method.resolve``:
    REST's ``datastore: reference``) resolved for the bench's model, SmolLM2, in ``cache_dir``.

    Raises:
        ValueError: such a method refuses its resolved settings (e.g. the reference datastore is not
            built); the message is its refusal, with the command that builds what is missing.
    """
    facts = CellFacts(
        device=device.split(":")[0],
        model_source="embedded",
        model_name="smollm2",
        compiled=compiled,
        dataset="mt_bench",
        tokenizer=tokenizer_source(SimpleNamespace(source="embedded", embedded="smollm2")),
        model_cache_dir=str(cache_dir or default_cache_dir()),
    )
    resolved: dict[str, Any] = dict(settings)
    for name in methods:
        method = get_method(name)
        if method.resolve is None:
            continue
        resolved = resolve_settings(name, resolved, facts)
        why = method.refuse({s: resolved.get(s) for s in method.sections}, facts) if method.refuse else None
        if why:
            raise ValueError(f"--methods {name}: {why}")
    return resolved


def parse_lookahead(text: str) -> LookaheadParams:
    """Parse ``N,W,G`` or ``N,W,G,<verification>`` into LookaheadParams (validated: a bad value
    names itself)."""
    parts = text.split(",")
    layout = parts.pop() if len(parts) == 4 else "flat"
    usage = f"use N,W,G or N,W,G,{'|'.join(VERIFICATION_LAYOUTS)}, e.g. 5,7,7 or 5,7,7,trie"
    if layout not in VERIFICATION_LAYOUTS:
        raise argparse.ArgumentTypeError(f"--lookahead {text!r}: verification {layout!r} is not allowed; {usage}")
    try:
        n, w, g = (int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--lookahead {text!r}: {usage}") from None
    return LookaheadParams(n, w, g, verification=layout)


def build_arms(
    model,
    eos: int | None,
    max_new_tokens: int,
    configs: list[LookaheadParams],
    methods: list[str],
    compiled: CompiledForwards | None = None,
    settings: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Arm]:
    """Name -> function(prompt ids) for every arm of the benchmark; "ar" first (the reference).

    Args:
        model: the model every arm runs.
        eos: the id that ends a generation (None: none).
        max_new_tokens: budget of every generation.
        configs: the lookahead configurations (one arm each, named by N, W, G and the layout).
        methods: registered methods, each run with the engine's default settings; "ar" is added first.
        compiled: run every arm in the compiled mode (all arms in one mode, as in a cell); None: eager.
        settings: section -> key -> value given to the methods that read the section (``--setting``),
            e.g. REST's datastore; other keys keep the engine's defaults.
    """
    stop_ids = [eos] if eos is not None else []
    arms: dict[str, Arm] = {}
    for method in [REFERENCE, *[m for m in methods if m != REFERENCE]]:
        if method != "lookahead":
            arms[method] = bind_method(method, model, max_new_tokens, stop_ids, settings, compiled=compiled)
            continue
        for params in configs:
            name = f"lookahead N={params.ngram} W={params.window} G={params.guesses}"
            name += "" if params.verification == "flat" else f" {params.verification}"
            arms[name] = bind_method(method, model, max_new_tokens, stop_ids, {"lookahead": params}, compiled)
    return arms


def run_benchmark(arms: dict[str, Arm], prompts: list[list[int]], warmup: int) -> dict[str, list[DecodeResult]]:
    """Run every arm on every prompt with the timing harness (``runner.timing``); returns results per arm."""

    def progress(units):
        return tqdm(units, desc="prompts", unit="prompt")

    return run_paired(arms, prompts, warmup=warmup, progress=progress).results


def speedup_reference(results: dict[str, list[DecodeResult]]) -> str:
    """The arm every speedup is against: AR, or where ``ar_standard`` ran beside it (plain AR beside the
    batch-invariant path's) the faster of the two, as ``stats.speedup_baseline`` chooses in a cell (the
    one place that choice is made), each prompt a paired unit."""
    if STANDARD_PATH_REFERENCE not in results:
        return REFERENCE
    paired = pd.DataFrame.from_records(
        [
            {
                "arm": arm,
                "sample_id": i,
                "turn": 0,
                "repeat": 0,
                "wall_time_s": r.wall_time_s,
                "new_tokens": r.new_tokens,
            }
            for arm in (REFERENCE, STANDARD_PATH_REFERENCE)
            for i, r in enumerate(results[arm])
        ]
    )
    # Greedy: every bench arm decodes greedily, so the faster is the lower summed wall time.
    return stats.speedup_baseline(paired, sampled=False)


def summarise(results: dict[str, list[DecodeResult]]) -> list[ArmSummary]:
    """Per-arm ratios of sums against the faster AR (:func:`speedup_reference`; the same metric functions
    the runner uses); outputs compared with AR's tokens."""
    ar = results["ar"]
    baseline = speedup_reference(results)
    base_times = [r.wall_time_s for r in results[baseline]]
    rows = []
    for name, runs in results.items():
        times = [r.wall_time_s for r in runs]
        tokens = [r.new_tokens for r in runs]
        wall, forward = sum(times), sum(r.forward_time_s for r in runs)
        rows.append(
            ArmSummary(
                arm=name,
                tokens_per_s=tokens_per_s(tokens, times),
                speedup_vs_ar=speedup(base_times, times),
                speedup_baseline=baseline,
                compression_ratio=compression_ratio(tokens, [r.steps for r in runs]),
                # NaN where the forward time is not measured (compiled AR: no hook inside its compiled region).
                outside_forward_share=(wall - forward) / wall,
                matches_ar=match_rate([r.tokens == a.tokens for r, a in zip(runs, ar, strict=True)]),
                tokens_per_step=mean_decode_step_tokens(runs),
            )
        )
    return rows


def mean_decode_step_tokens(runs: list[DecodeResult]) -> float:
    """Input tokens per forward after the prefill, over all runs (NaN when an arm does not count them)."""
    step_tokens = [r.step_tokens for r in runs]
    if any(counts is None for counts in step_tokens):
        return float("nan")
    decode = [tokens for counts in step_tokens if counts is not None for tokens in counts[1:]]
    return sum(decode) / len(decode) if decode else float("nan")


def render_table(rows: list[ArmSummary], title: str) -> Table:
    """The summary as a rich table."""
    table = Table(title=title)
    baseline = rows[0].speedup_baseline if rows else REFERENCE
    headers = (
        "arm",
        "tokens/s",
        f"speedup vs {baseline}",
        "compression",
        "tokens/step",
        "time outside forward",
        "matches AR",
    )
    for header in headers:
        table.add_column(header, justify="left" if header == "arm" else "right")
    for row in rows:
        outside = (
            "n/a (generate)"
            if row.outside_forward_share != row.outside_forward_share
            else f"{row.outside_forward_share:.1%}"
        )
        table.add_row(
            row.arm,
            f"{row.tokens_per_s:.1f}",
            f"{row.speedup_vs_ar:.2f}x",
            f"{row.compression_ratio:.2f}",
            f"{row.tokens_per_step:.1f}",
            outside,
            f"{row.matches_ar:.0%}",
        )
    return table


def main(argv: list[str] | None = None) -> Path:
    """Command-line entry point; returns the path of the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m lade_bench.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=4, help="MT-Bench first-turn prompts to run (default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument(
        "--lookahead",
        type=parse_lookahead,
        nargs="+",
        default=None,
        metavar="N,W,G[,trie]",
        help="lookahead configurations, optionally with trie verification (default: 5,7,7 4,3,3 3,2,2 2,4,4)",
    )
    parser.add_argument(
        "--methods",
        type=_bench_method,
        nargs="+",
        default=["ar", "prompt_lookup", "lookahead"],
        metavar="NAME",
        help="registered methods to run, ar always first (default: ar prompt_lookup lookahead)",
    )
    parser.add_argument(
        "--setting",
        type=parse_setting,
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a method setting other than the engine default, e.g. rest.datastore=PATH (repeatable)",
    )
    parser.add_argument("--jacobi", action="store_true", help="also run Jacobi decoding without the pool")
    parser.add_argument("--warmup", type=int, default=1, help="untimed generations per arm first (default 1)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument(
        "--cache-dir", default=None, help="where the converted model lives (default ~/.cache/lade_bench)"
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="run every arm compiled (static KV cache, torch.compile; compile time is untimed and reported)",
    )
    parser.add_argument(
        "--step-cost",
        action="store_true",
        help="instead of the arms: forward time per step width for each --step-cost-dtypes x --step-cost-modes",
    )
    parser.add_argument("--step-cost-dtypes", nargs="+", default=["float32", "bfloat16"], choices=list(_DTYPES))
    parser.add_argument("--step-cost-modes", nargs="+", default=["eager", "compiled"], choices=["eager", "compiled"])
    parser.add_argument(
        "--step-path",
        default="standard",
        choices=["standard", "batch_invariant"],
        help="batch_invariant: every arm (and the step-cost curves) on the batch-invariant step path "
        "(decoding.core.batch_invariant; CPU, bfloat16); the ar_standard method then times plain AR beside it",
    )
    parser.add_argument("--output", default="runs/bench", help="folder for the JSON report (default runs/bench)")
    args = parser.parse_args(argv)
    if args.step_path == "batch_invariant":
        dtypes = args.step_cost_dtypes if args.step_cost else [args.dtype]
        device_type = torch.device(args.device).type
        refusals = [batch_invariant.supported_message(device_type, dtype) for dtype in dtypes]
        refused = next((message for message in refusals if message), None)
        if refused:
            parser.error(refused)
        if args.compile or (args.step_cost and "compiled" in args.step_cost_modes):
            parser.error("--step-path batch_invariant runs eager only: drop --compile, or pass --step-cost-modes eager")
    configs = args.lookahead or [parse_lookahead(c) for c in ("5,7,7", "4,3,3", "3,2,2", "2,4,4")]
    methods = [*args.methods, *(["jacobi"] if args.jacobi and "jacobi" not in args.methods else [])]

    console = Console()
    if not console.is_terminal:
        console = Console(width=130)  # logs and CI: keep the table on one line per arm
    output_dir = Path(args.output).resolve()
    if args.step_cost:
        return step_cost_main(args, configs, console, output_dir)
    if args.compile:
        not_compiled = [m for m in methods if not get_method(m).compiles]
        if not_compiled:
            allowed = list(methods_where(lambda method: method.compiles))
            parser.error(f"--compile: {not_compiled} have no compiled mode; use --methods from {allowed}")
    given: dict[str, dict[str, Any]] = {}
    for section, key, value in args.setting:
        given.setdefault(section, {})[key] = value
    try:  # before the model loads: a resource a method names (REST's reference datastore) must be there
        settings = resolved_bench_settings(methods, given, args.cache_dir, args.device, args.compile)
    except ValueError as err:
        parser.error(str(err))
    console.print(f"Engine benchmark; the report will be written under {output_dir}")
    model, tokenizer = load_embedded_smollm2(args.cache_dir, dtype=getattr(torch, args.dtype), device=args.device)
    if args.step_path == "batch_invariant":
        batch_invariant.enable(model)
    samples = load_dataset_samples("mt_bench", limit=args.prompts)
    prompts = [render_prompt(tokenizer, sample, 0, [], chat=True) for sample in samples]
    compiled = CompiledForwards() if args.compile else None
    arms = build_arms(model, tokenizer.eos_token_id, args.max_new_tokens, configs, methods, compiled, settings)
    started = time.time()
    results = run_benchmark(arms, prompts, args.warmup)
    rows = summarise(results)
    # On a CPU the processor model and its dtype features, which set the speed (not just "x86_64").
    device = (
        torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else device_processor(torch.device(args.device)) or "cpu"
    )
    mode = f"compiled ({compiled.mode_on(model_device(model))})" if compiled is not None else "eager"
    title = (
        f"SmolLM2-135M-Instruct, {len(prompts)} MT-Bench prompts, {args.max_new_tokens} new tokens max, "
        f"{args.dtype} {mode}{', batch-invariant step path' if args.step_path == 'batch_invariant' else ''} "
        f"on {device} ({torch.get_num_threads()} threads)"
    )
    console.print(render_table(rows, title))
    report = {
        "title": title,
        "args": {k: (str(v) if k == "lookahead" else v) for k, v in vars(args).items()},
        "elapsed_s": time.time() - started,
        "summary": [asdict(row) for row in rows],
        "runs": {name: [asdict(r) for r in runs] for name, runs in results.items()},
    }
    path = output_dir / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, report)
    console.print(f"report: {path}")
    return path


_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def step_cost_curves(
    load: Callable[[torch.dtype], torch.nn.Module],
    dtypes: list[str],
    modes: list[str],
    token_counts: list[int],
    context_tokens: int = 128,
    backend: str = "inductor",
) -> list[dict]:
    """One forward-time curve (``profiling.measure_forward_curve``) per (dtype, mode), in that order.

    Args:
        load: dtype -> the model in that dtype (loaded once per dtype).
        modes: ``eager`` and/or ``compiled`` (a static cache and the forward compiled per width).
        backend: torch.compile's backend for the compiled curves (``CompiledForwards.backend``).
    """
    curves = []
    for dtype in dtypes:
        model = load(_DTYPES[dtype])
        for mode in modes:
            compiled = CompiledForwards(backend=backend) if mode == "compiled" else None
            curves.append(measure_forward_curve(model, token_counts, context_tokens=context_tokens, compiled=compiled))
    return curves


def render_step_costs(curves: list[dict], title: str) -> Table:
    """Forward time per step width, each curve's column also as a multiple of its one-token step."""
    table = Table(title=title)
    table.add_column("tokens per step", justify="right")
    for curve in curves:
        table.add_column(f"{curve['dtype']} {curve['compile_mode']}", justify="right")
    for index, tokens in enumerate(curves[0]["token_counts"]):
        cells = []
        for curve in curves:
            seconds = curve["forward_time_s"][index]
            cells.append(f"{seconds * 1e3:.1f} ms ({seconds / curve['forward_time_s'][0]:.2f}x)")
        table.add_row(str(tokens), *cells)
    return table


def step_cost_main(
    args: argparse.Namespace, configs: list[LookaheadParams], console: Console, output_dir: Path
) -> Path:
    """``--step-cost``: measure, print and save the step-cost curves of the embedded model."""
    shapes = [(p.ngram, p.window, p.guesses) for p in configs]
    counts = default_token_counts(shapes, largest=64)

    def load(dtype: torch.dtype) -> torch.nn.Module:
        model = load_embedded_smollm2(args.cache_dir, dtype=dtype, device=args.device)[0]
        if args.step_path == "batch_invariant":
            batch_invariant.enable(model)
        return model

    console.print(f"Step-cost curves for {args.step_cost_dtypes} x {args.step_cost_modes} at {counts} tokens per step")
    curves = step_cost_curves(load, args.step_cost_dtypes, args.step_cost_modes, counts)
    where = ", ".join(part for part in (curves[0]["device"], curves[0].get("processor")) if part)
    path_note = ", batch-invariant step path" if args.step_path == "batch_invariant" else ""
    title = f"SmolLM2-135M-Instruct forward time per step{path_note}, {where} (context 128 tokens, median)"
    console.print(render_step_costs(curves, title))
    path = output_dir / f"step-cost-{time.strftime('%Y%m%d-%H%M%S')}.json"
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"title": title, "args": {k: str(v) for k, v in vars(args).items()}, "curves": curves})
    console.print(f"step-cost curves: {path}")
    return path


if __name__ == "__main__":
    main()
