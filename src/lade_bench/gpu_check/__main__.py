"""The GPU check: exactness in fp16 and bf16 and the speed of AR vs lookahead vs prompt lookup, on both
embedded models (SmolLM2-135M-Instruct and Gemma-3-270M).

    python -m lade_bench.gpu_check [--output DIR] [--prompts 20] [--max-new-tokens 256] ...

``bash scripts/gpu_check.sh`` installs what is needed and runs this. Per model: the device profile
(forward time vs tokens per step); then, in the first dtype (float16, the paper's), AR, prompt
lookup and lookahead with the paper presets (paper_7b, paper_13b) and the CPU preset (cpu_small) on
MT-Bench first turns, arms alternated per prompt after a warm-up, which gives the speed table and
the float16 exactness, plus lookahead paper_7b under ``attn_implementation="flex_attention"`` (a second
copy of the model; ``--no-flex-attention`` drops it); then in each further dtype (bfloat16) AR and
lookahead paper_7b for exactness.
Every greedy mismatch is located and its logit margins measured (``lade_bench.decoding.core.divergence``);
one whose token sits more than ``--margin-tolerance`` logits below AR's is an engine error.

A time budget keeps the whole check short: each stage stops starting new prompts at its share of
the budget and the table says how many prompts it ran. Writes ``table.md``, ``gpu_check.json`` (every
generation, mismatch and setting) and ``device_profile_<model>.json`` into the output folder.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import transformers
from rich.console import Console

from lade_bench.gpu_check.stages import MODEL_NAMES, check_model, notes
from lade_bench.gpu_check.table import markdown_table, rich_table
from lade_bench.models.loading import DTYPES, resolve_device
from lade_bench.profiling import describe_device
from lade_bench.results.atomic import atomic_write_json, atomic_write_text


def _at_least(low: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}; give an integer >= {low}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its message for a non-number
    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options (defaults: the GPU recipe of docs/gpu_check.md)."""
    parser = argparse.ArgumentParser(prog="python -m lade_bench.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=None, help="results folder (default runs/gpu_check/<timestamp>)")
    parser.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=list(MODEL_NAMES))
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"], choices=list(DTYPES))
    parser.add_argument("--prompts", type=_at_least(1), default=20, help="MT-Bench first turns (default 20)")
    parser.add_argument("--max-new-tokens", type=_at_least(1), default=256, help="tokens per generation, speed stage")
    parser.add_argument(
        "--exactness-new-tokens", type=_at_least(1), default=128, help="tokens per generation, later dtypes"
    )
    parser.add_argument(
        "--flex-attention",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run lookahead paper_7b with attn_implementation=flex_attention in the first dtype (default on)",
    )
    parser.add_argument(
        "--compiled",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run compiled AR and compiled lookahead (static cache, torch.compile) as a pair (default on)",
    )
    parser.add_argument("--warmup", type=_at_least(0), default=1, help="untimed generations per arm first (default 1)")
    # A CPU try of the plumbing can cut the profile's passes; the defaults are every device profile's.
    parser.add_argument(
        "--profile-repeats", type=_at_least(1), default=None, help="timed passes per token count of the device profile"
    )
    parser.add_argument(
        "--profile-warmup", type=_at_least(0), default=None, help="untimed passes per token count before them"
    )
    parser.add_argument("--margin-tolerance", type=float, default=1.0, help="logits; larger gaps are engine errors")
    parser.add_argument("--time-budget-s", type=float, default=300.0, help="for all stages together (default 300)")
    parser.add_argument("--device", default="cuda", help="cuda (default); cpu only to try the plumbing")
    parser.add_argument("--cache-dir", default=None, help="converted models (default ~/.cache/lade_bench)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> Path:
    """Run the check; returns the results folder. Exits with status 2 when the device is unavailable."""
    args = parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as err:
        print(f"GPU check: {err}. It needs an NVIDIA GPU; --device cpu runs the same steps on the CPU.")
        raise SystemExit(2) from err
    out = Path(args.output or f"runs/gpu_check/{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    console = Console(width=None if sys.stdout.isatty() else 160)
    started = time.monotonic()
    deadline = started + args.time_budget_s
    records, details = [], {}
    for index, name in enumerate(args.models):
        now = time.monotonic()
        model_deadline = now + max(deadline - now, 0.0) / (len(args.models) - index)
        console.print(f"[bold]{name}[/bold]: device profile, then {', '.join(args.dtypes)}")
        result = check_model(name, args, device, out, model_deadline)
        records.extend(result["records"])
        details[name] = result["details"]
    title = (
        f"GPU check on {describe_device(device)}: {args.prompts} MT-Bench prompts (first turns), greedy, "
        f"{args.max_new_tokens} new tokens ({args.exactness_new_tokens} in later dtypes)"
    )
    lines = notes(details, args.margin_tolerance)
    console.print(rich_table(records, title))
    for line in lines:
        console.print(line, markup=False, highlight=False)
    text = f"# {title}\n\n" + markdown_table(records) + "".join(f"\n- {line}" for line in lines) + "\n"
    atomic_write_text(out / "table.md", text)
    report = {
        "title": title,
        "device": describe_device(device),
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__},
        "args": vars(args),
        "elapsed_s": time.monotonic() - started,
        "summary": records,
        "details": details,
    }
    atomic_write_json(out / "gpu_check.json", report)
    console.print(f"results: {out}", soft_wrap=True, markup=False, highlight=False)
    return out


if __name__ == "__main__":
    main()
