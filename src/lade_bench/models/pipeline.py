"""Pipeline-parallel placement: a model's layers split over K devices the way Accelerate does.

The ``ar_pp`` arm (the paper's second strong-scaling baseline) runs plain AR on a model whose
decoder layers are spread contiguously over ``cuda:0..K-1`` in one process (Accelerate's "balanced"
``device_map``): a forward passes the hidden state from device to device, so only one device works
at a time, and K devices add memory, not speed, to a single sequence.

:func:`pipeline_device_map` is pure: it reads parameter sizes only, from a model on the meta device
(built from the config under ``accelerate.init_empty_weights``), so the placement can be computed and
tested without any GPU. :func:`load_pipeline_parallel` then loads the weights and dispatches them.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PretrainedConfig

log = logging.getLogger(__name__)

# Accelerate logs a warning for each device index it cannot see; planning for K devices that are not
# here (a test, the plan on a login node) is the point of the pure planner.
_ACCELERATE_LOG = "accelerate.utils.modeling"
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)$")


class PipelineParallelError(ValueError):
    """A model or device count that cannot be split into a pipeline (the message says why)."""


def meta_model(config: PretrainedConfig) -> torch.nn.Module:
    """The causal LM of ``config`` with every parameter on the meta device (sizes only, no memory)."""
    from accelerate import init_empty_weights

    with init_empty_weights():
        return AutoModelForCausalLM.from_config(config)


def pipeline_device_map(
    model: torch.nn.Module | PretrainedConfig, devices: int, dtype: torch.dtype | None = None
) -> dict[str, int]:
    """Module name -> device index (0..``devices``-1): the layers split as Accelerate balances them.

    Accelerate's ``get_balanced_memory`` gives every device the same budget (model size / K plus one
    layer's worth of slack) and ``infer_auto_device_map`` fills the devices in module order, never
    splitting a decoder layer (``model._no_split_modules``). Equal budgets stand in for the devices'
    real memory, so the placement is the same on any machine and balanced by parameter size.

    Args:
        model: a model (on any device, the meta device included) or a config to build a meta model of.
        devices: K >= 2.
        dtype: the dtype the weights will have (None: the model's).

    Raises:
        PipelineParallelError: ``devices`` < 2, or fewer decoder layers than devices.
    """
    from accelerate import infer_auto_device_map
    from accelerate.utils import get_balanced_memory

    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 2:
        raise PipelineParallelError(f"devices={devices!r}: a pipeline needs an integer >= 2 devices")
    if isinstance(model, PretrainedConfig):
        model = meta_model(model)
    layers = len(decoder_layer_names(model))
    if layers < devices:
        raise PipelineParallelError(
            f"the model has {layers} decoder layer(s), fewer than the {devices} devices of the pipeline; "
            f"use at most {layers} devices"
        )
    no_split = list(getattr(model, "_no_split_modules", None) or [])
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    ample = {index: total for index in range(devices)}  # any device could hold the whole model alone
    quiet = logging.getLogger(_ACCELERATE_LOG)
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        budget = get_balanced_memory(model, max_memory=ample, no_split_module_classes=no_split, dtype=dtype)
        placement = infer_auto_device_map(model, max_memory=budget, no_split_module_classes=no_split, dtype=dtype)
    finally:
        quiet.setLevel(level)
    device_map: dict[str, int] = {}
    for name, device in placement.items():
        if not isinstance(device, int):  # "cpu" or "disk": the budgets above never leave anything over
            raise PipelineParallelError(f"module {name!r} was placed on {device!r}, not on one of {devices} devices")
        device_map[name] = device
    return device_map


def decoder_layer_names(model: torch.nn.Module) -> list[str]:
    """Names of the decoder layers (``...layers.<i>``), in order."""
    names = [name for name, _ in model.named_modules() if _LAYER.search(name)]
    return sorted(names, key=lambda name: int(_LAYER.search(name).group(1)))  # type: ignore[union-attr]


def layers_per_device(model: torch.nn.Module, device_map: dict[str, int]) -> dict[int, list[int]]:
    """Device index -> the decoder layer indices it holds, for logs and tests."""
    spread: dict[int, list[int]] = {}
    for name in decoder_layer_names(model):
        spread.setdefault(device_of(name, device_map), []).append(int(_LAYER.search(name).group(1)))  # type: ignore[union-attr]
    return spread


def device_of(module_name: str, device_map: dict[str, int]) -> int:
    """The device of ``module_name`` under ``device_map`` (the entry of its nearest listed ancestor)."""
    name = module_name
    while name not in device_map:
        if not name:
            raise KeyError(f"{module_name!r} is not covered by the device map")
        name = name.rpartition(".")[0]
    return device_map[name]


def load_pipeline_parallel(
    model_cfg: Any,
    devices: int,
    dtype: torch.dtype,
    attn_implementation: str,
    cache_dir: str | None = None,
) -> torch.nn.Module:
    """The model of ``model_cfg`` with its layers dispatched over ``cuda:0..devices-1``.

    Loaded on the CPU first (any source: embedded, tiny, hf), then moved piece by piece with
    ``accelerate.dispatch_model``, whose hooks move the hidden state between devices.

    Raises:
        PipelineParallelError: fewer than ``devices`` CUDA devices, or a model that cannot be split.
    """
    from accelerate import dispatch_model

    from lade_bench.models.loading import load_model

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible < devices:
        raise PipelineParallelError(f"a pipeline over {devices} CUDA devices needs them, and {visible} are visible")
    model, _ = load_model(
        model_cfg, torch.device("cpu"), dtype, attn_implementation, cache_dir=cache_dir, runs_on=torch.device("cuda")
    )
    device_map = pipeline_device_map(model, devices, dtype)
    log.info("pipeline over %d devices, decoder layers per device: %s", devices, layers_per_device(model, device_map))
    return dispatch_model(model, device_map={name: f"cuda:{index}" for name, index in device_map.items()})
