"""Convert the embedded models into the model cache ahead of use: ``python -m lade_bench.models.prepare``.

The first load of an embedded model converts its GGUF (dequantised to fp32, with its tokenizer) into
plain files in the cache, which takes about a minute for Gemma-3-270M's 262,144-token tokenizer and
weights. ``scripts/setup.sh`` runs this once, so that neither the main job nor the test suite spends
that minute; a folder already converted is reused as is, so rerunning it costs nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from lade_bench.models.loading import EMBEDDED_MODELS


def prepare(models: Sequence[str], cache_dir: str | Path | None = None) -> dict[str, Path]:
    """Convert each of ``models`` (``model.embedded`` names) into ``cache_dir`` unless it is there already.

    Returns:
        Each model's converted folder.

    Raises:
        ValueError: a name is not an embedded model; the message lists the allowed ones.
    """
    unknown = [m for m in models if m not in EMBEDDED_MODELS]
    if unknown:
        listed = ", ".join(map(repr, unknown))
        raise ValueError(f"not an embedded model: {listed}; allowed: {', '.join(EMBEDDED_MODELS)}")
    cache = Path(cache_dir).expanduser() if cache_dir is not None else None
    return {model: EMBEDDED_MODELS[model].folder(cache) for model in models}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: convert the embedded models (all by default) and print where each went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        nargs="+",
        choices=list(EMBEDDED_MODELS),
        default=list(EMBEDDED_MODELS),
        help="which embedded models",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="the model cache (the runner's model_cache_dir); default ~/.cache/lade_bench",
    )
    args = parser.parse_args(argv)
    for model, folder in prepare(args.models, args.cache_dir).items():
        print(f"{model}: converted in {folder}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
