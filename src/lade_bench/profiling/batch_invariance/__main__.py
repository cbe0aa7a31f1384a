"""``python -m lade_bench.profiling.batch_invariance --out DIR``: the op-by-op account of batch invariance.

Loads each embedded model (``--models``) in each dtype (``--dtypes``) on the CPU, runs the first
XSum article long enough for the account through it, and compares every op of one decoder layer
(``--layer``, default the middle one) row by row on the standard and the batch-invariant step paths
(:mod:`lade_bench.profiling.batch_invariance.account`); writes ``ops.csv`` and ``ops.md`` into
``--out``. The committed table (run pinned to one core, ``OMP_NUM_THREADS=1 taskset -c 0``)::

    python -m lade_bench.profiling.batch_invariance --out paper_figures/batch_invariance
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import torch
from transformers import AutoConfig

from lade_bench.datasets.prompts import render_prompt
from lade_bench.datasets.registry import load_dataset_samples
from lade_bench.decoding.core import batch_invariant
from lade_bench.models.loading import DEFAULT_SETUP_MODELS, DTYPES, EMBEDDED_MODELS
from lade_bench.profiling.batch_invariance.account import CACHE_TOKENS, ROW_COUNTS, TREE, account_model, tokens_needed
from lade_bench.profiling.batch_invariance.table import frame_of, write_table
from lade_bench.profiling.processor import processor_identity, processor_label

PROG = "python -m lade_bench.profiling.batch_invariance"
# The real text the layer's inputs come from: the first article of this dataset long enough.
DATASET = "xsum"
# Articles searched for one long enough (XSum's are a few hundred tokens; most qualify).
SEARCHED = 50


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive count")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", required=True, help="folder for ops.csv and ops.md")
    parser.add_argument("--models", nargs="+", choices=list(EMBEDDED_MODELS), default=list(DEFAULT_SETUP_MODELS))
    parser.add_argument("--dtypes", nargs="+", choices=["bfloat16", "float32"], default=["bfloat16", "float32"])
    parser.add_argument("--layer", type=int, default=None, help="decoder layer index (default: the middle one)")
    parser.add_argument("--cache-tokens", type=_positive, default=CACHE_TOKENS, help="tokens before the step")
    parser.add_argument("--rows", type=_positive, nargs="+", default=list(ROW_COUNTS), help="step row counts k")
    parser.add_argument("--tree", type=_positive, nargs=3, default=list(TREE), metavar=("N", "W", "G"))
    parser.add_argument("--threads", type=_positive, default=1, help="torch threads (default: %(default)s)")
    parser.add_argument("--cache-dir", default=None, help="where the embedded models are converted")
    args = parser.parse_args(argv)
    if args.tree[0] < 2:
        parser.error(f"--tree N={args.tree[0]} is not a lookahead shape; N is at least 2")
    return args


def layer_of(model: str, asked: int | None, cache_dir: str | None) -> int:
    """The layer to account for in ``model`` (its config read, no weights loaded).

    Raises:
        ValueError: ``asked`` is not one of the model's layers (names the allowed range).
    """
    folder = EMBEDDED_MODELS[model].folder(Path(cache_dir).expanduser() if cache_dir else None)
    config = AutoConfig.from_pretrained(folder)
    layers = int(getattr(config, "text_config", config).num_hidden_layers)
    if asked is None:
        return layers // 2
    if not 0 <= asked < layers:
        raise ValueError(f"--layer {asked} is not a layer of {model}; use 0..{layers - 1}")
    return asked


def prompt_ids(tokenizer: object, needed: int) -> tuple[torch.Tensor, str]:
    """The first :data:`DATASET` article whose prompt has ``needed`` tokens: its ids and its sample id.

    Raises:
        ValueError: none of the first :data:`SEARCHED` articles is that long.
    """
    chat = getattr(tokenizer, "chat_template", None) is not None
    for sample in load_dataset_samples(DATASET, limit=SEARCHED):
        ids = render_prompt(tokenizer, sample, 0, [], chat=chat)
        if len(ids) >= needed:
            return torch.tensor(ids[:needed]), sample.sample_id
    raise ValueError(f"no {DATASET} article among the first {SEARCHED} has {needed} tokens; ask for fewer")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the account for every model and dtype asked, write the table; 2 on bad arguments."""
    args = parse_args(argv)
    try:
        layers = {model: layer_of(model, args.layer, args.cache_dir) for model in args.models}
    except ValueError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    needed = tokens_needed(args.cache_tokens, args.rows, tuple(args.tree))
    cache = Path(args.cache_dir).expanduser() if args.cache_dir else None
    frames, prompts = [], []
    for model_name in args.models:
        for dtype in args.dtypes:
            model, tokenizer = EMBEDDED_MODELS[model_name].load(cache, dtype=DTYPES[dtype], device="cpu")
            ids, sample = prompt_ids(tokenizer, needed)
            # The path is offered in bfloat16 only; elsewhere it is measured with its refusing check off.
            offered = batch_invariant.supported_message("cpu", dtype) is None
            records = account_model(
                model, ids, layer=layers[model_name], cache_tokens=args.cache_tokens, row_counts=args.rows,
                tree=tuple(args.tree), check=offered,
            )  # fmt: skip
            run = {"model": model_name, "dtype": dtype, "layer": layers[model_name], "cache_tokens": args.cache_tokens}
            frames.append(frame_of(records, run))
            prompts.append(f"{model_name} {dtype}: {DATASET} sample {sample}, first {needed} prompt tokens")
            print(f"{model_name} {dtype}: {sum(r['rows_differing'] > 0 for r in records)} comparisons differ")
    command = " ".join([PROG, *(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))])
    about = [
        f"host CPU: {processor_label(processor_identity())}",
        f"torch {torch.__version__}, {args.threads} thread(s); command: `{command}`",
        "layer inputs: " + "; ".join(prompts),
        "paths: standard = the model as loaded (SDPA attention); batch_invariant = after "
        "`decoding.core.batch_invariant.enable` (its load-time check on in bfloat16; in float32, where the path "
        "is refused, the check is off so the ops can be measured)",
    ]
    write_table(pd.concat(frames, ignore_index=True), about, Path(args.out))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
