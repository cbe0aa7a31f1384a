"""Model facts the loops need (device, dtype, cache argument) and device-synchronised timing."""

from __future__ import annotations

import inspect
import time

import torch


def device_synchronizer(device: torch.device):
    """A no-argument function that blocks until queued work on ``device`` is done (no-op on CPU)."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    if device.type == "mps":
        return torch.mps.synchronize
    return lambda: None


def model_device(model: torch.nn.Module) -> torch.device:
    """Device of the model's first parameter (where inputs must go)."""
    return next(model.parameters()).device


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    """Floating dtype of the model's first floating parameter (attention masks must match it)."""
    for parameter in model.parameters():
        if parameter.is_floating_point():
            return parameter.dtype
    return torch.float32


def cache_argument_name(model: torch.nn.Module) -> str:
    """Keyword under which ``model.forward`` takes the KV cache.

    transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name warns and goes away in
    5.40); earlier 5.x releases only know the old name.
    """
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class Stopwatch:
    """Accumulates device-synchronised elapsed time over several measured regions."""

    def __init__(self, device: torch.device) -> None:
        """A stopwatch whose readings include all work queued on ``device``."""
        self._sync = device_synchronizer(device)
        self.total = 0.0
        self._start = 0.0

    def start(self) -> None:
        """Begin a measured region (after the device has drained)."""
        self._sync()
        self._start = time.perf_counter()

    def stop(self) -> float:
        """End the region, add it to ``total`` and return its length in seconds."""
        self._sync()
        elapsed = time.perf_counter() - self._start
        self.total += elapsed
        return elapsed
