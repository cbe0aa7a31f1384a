"""How long one forward pass takes on this device as a function of the tokens it carries.

Lookahead trades steps for wider steps: a step with ``(W + G) * (N - 1)`` input tokens replaces
several one-token AR steps. Whether that pays off depends on how flat the forward-time curve is on
the device, so the curve is measured once per sweep and device kind and stored beside the sweep
index: ``device_profiles/<device kind>.json`` per kind, and ``device_profile.json``, the sweep's
profile that the report reads, from the first kind measured (a sweep normally runs on one kind of
device; where a cluster mixed several, each kind's own curve stays in ``device_profiles/``). The
report predicts each (N, W, G)'s speedup from it (see ``aggregate.predicted_speedups``). Many jobs of
one sweep do not all measure: the runner lets one job per device kind do it under a lock.

Measurement (nanoGPT-style benchmark discipline): a fixed random context is prefilled into a KV
cache once; then for each k, ``warmup`` untimed and ``repeats`` timed forward passes with k new
tokens on top of it, each device-synchronised, the cache cropped back after every pass; the median
of the timed passes is kept. The passes use the model's ordinary causal mask; lookahead's custom 4D
mask costs the same attention FLOPs for the same number of tokens.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

from lade_bench.decoding.timing import Stopwatch, cache_argument_name, model_device, model_dtype
from lade_bench.results.atomic import atomic_write_json, fsync_dir, temp_name

PROFILE_JSON = "device_profile.json"
# One profile per device kind, for sweeps whose jobs ran on several kinds of device.
PROFILES_DIR = "device_profiles"
PROFILE_VERSION = 1


def default_token_counts(lookahead_shapes: Iterable[tuple[int, int, int]] = (), largest: int = 256) -> list[int]:
    """Token counts to measure: powers of two up to ``largest`` plus every shape's step width.

    Args:
        lookahead_shapes: ``(N, W, G)`` of the sweep's cells; each adds ``(W + G) * (N - 1)``.
        largest: the largest power of two measured (the curve's x range).
    """
    counts = {1}
    k = 1
    while k < largest:
        k *= 2
        counts.add(k)
    for n, w, g in lookahead_shapes:
        counts.add((int(w) + int(g)) * (int(n) - 1))
    return sorted(counts)


def measure_forward_curve(
    model: torch.nn.Module,
    token_counts: Sequence[int],
    *,
    context_tokens: int = 128,
    warmup: int = 2,
    repeats: int = 5,
    seed: int = 0,
    model_name: str | None = None,
) -> dict[str, Any]:
    """Median time of one forward pass with k new tokens on a KV cache of ``context_tokens``, per k.

    Args:
        model: a transformers causal LM (batch size 1), already on its device and in eval mode.
        token_counts: the k values, each >= 1; ``context_tokens + max(k)`` must fit the model's
            positions.
        context_tokens: length of the cached context the new tokens attend to.
        warmup: untimed passes per k before timing (lazy kernel selection, allocator growth).
        repeats: timed passes per k; the median is kept.
        seed: seeds the random context and new-token ids.
        model_name: recorded in the profile; defaults to the model config's ``name_or_path``.

    Returns:
        A JSON-serialisable profile: ``token_counts``, ``forward_time_s`` (median per k, seconds),
        ``context_tokens``, ``warmup``, ``repeats``, ``device``, ``dtype``, ``model``, versions.

    Raises:
        ValueError: a k < 1, ``repeats < 1``, or a context that does not fit the model.
    """
    counts = sorted({int(k) for k in token_counts})
    if not counts or counts[0] < 1:
        raise ValueError(f"token_counts must be integers >= 1, got {list(token_counts)!r}")
    if repeats < 1 or warmup < 0 or context_tokens < 1:
        raise ValueError(
            f"need repeats >= 1, warmup >= 0, context_tokens >= 1; got {repeats}, {warmup}, {context_tokens}"
        )
    config: Any = model.config  # a transformers config (nn.Module's attribute typing says Tensor)
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if positions is not None and context_tokens + counts[-1] > positions:
        raise ValueError(
            f"context_tokens + max(k) = {context_tokens + counts[-1]} exceeds the model's {positions} positions"
        )
    device = model_device(model)
    generator = torch.Generator().manual_seed(seed)
    vocab = int(config.vocab_size)
    cache_arg = cache_argument_name(model)
    context = torch.randint(0, vocab, (1, context_tokens), generator=generator).to(device)
    clock = Stopwatch(device)
    medians = []
    with torch.no_grad():
        cache = DynamicCache()
        model(input_ids=context, use_cache=True, **{cache_arg: cache})
        for k in counts:
            new_ids = torch.randint(0, vocab, (1, k), generator=generator).to(device)
            times = []
            for attempt in range(warmup + repeats):
                clock.start()
                model(input_ids=new_ids, use_cache=True, **{cache_arg: cache})
                elapsed = clock.stop()
                cache.crop(-k)  # transformers 5 crops by a negative count of tokens to drop
                if attempt >= warmup:
                    times.append(elapsed)
            medians.append(statistics.median(times))
    return {
        "version": PROFILE_VERSION,
        "token_counts": counts,
        "forward_time_s": medians,
        "context_tokens": context_tokens,
        "warmup": warmup,
        "repeats": repeats,
        "seed": seed,
        "device": describe_device(device),
        "device_kind": device_kind(device),
        "dtype": str(model_dtype(model)).removeprefix("torch."),
        "model": model_name or getattr(config, "name_or_path", "") or type(model).__name__,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def describe_device(device: torch.device) -> str:
    """Human-readable device, e.g. ``"cuda:0 NVIDIA H200"`` or ``"cpu x86_64 (16 threads)"``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} {torch.cuda.get_device_name(index)}"
    if device.type == "cpu":
        return f"cpu {platform.machine()} ({torch.get_num_threads()} threads)"
    return str(device)


def device_kind(device: torch.device) -> str:
    """What a profile describes: the device without its index, e.g. ``"cuda NVIDIA H200"``.

    Two GPUs of one model are one kind (their curves agree); a CPU's kind keeps its thread count,
    which sets its speed.
    """
    return re.sub(r"^(\w+):\d+", r"\1", describe_device(device))


def kind_slug(kind: str) -> str:
    """A file-name-safe form of a device kind, e.g. ``cuda-nvidia-h200``."""
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") or "device"


def kind_profile_path(sweep_dir: str | os.PathLike[str], kind: str) -> Path:
    """Where the profile of device kind ``kind`` is kept in a sweep folder."""
    return Path(sweep_dir) / PROFILES_DIR / f"{kind_slug(kind)}.json"


def has_profile(sweep_dir: str | os.PathLike[str], kind: str) -> bool:
    """True when the sweep already has a profile of device kind ``kind``.

    A sweep recorded before profiles were kept per kind has only ``device_profile.json``; it counts
    for every kind, as it did then.
    """
    if kind_profile_path(sweep_dir, kind).is_file():
        return True
    profile = load_profile(sweep_dir)
    return profile is not None and profile.get("device_kind", kind) == kind


def publish_profile(sweep_dir: str | os.PathLike[str], profile: Mapping[str, Any]) -> Path:
    """Save the profile of its device kind, and as the sweep's profile unless it has one already.

    The sweep's ``device_profile.json`` is created, never replaced (a hard link of a finished temp
    file: atomic, and exactly one of several publishing jobs wins). Returns the kind's file.
    """
    kind = profile.get("device_kind") or "device"
    path = kind_profile_path(sweep_dir, kind)
    atomic_write_json(path, dict(profile))
    canonical = Path(sweep_dir) / PROFILE_JSON
    if not canonical.exists():
        _create_once(canonical, profile)
    return path


def _create_once(canonical: Path, profile: Mapping[str, Any]) -> None:
    """Create ``canonical`` holding ``profile`` unless it exists (a hard link of a finished temp file)."""
    draft = temp_name(canonical)
    try:
        atomic_write_json(draft, dict(profile))
        try:
            os.link(draft, canonical)
        except FileExistsError:
            pass  # another job published first: its profile stays the sweep's
        except OSError:  # no hard links on this file system: a plain rename, if still absent
            if not canonical.exists():
                os.replace(draft, canonical)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(draft)
    fsync_dir(canonical.parent)


def save_profile(sweep_dir: str | os.PathLike[str], profile: Mapping[str, Any]) -> Path:
    """Write ``profile`` atomically as ``<sweep_dir>/device_profile.json`` and return the path."""
    path = Path(sweep_dir) / PROFILE_JSON
    atomic_write_json(path, dict(profile))
    return path


def load_profile(sweep_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The sweep's device profile, or None when it has none.

    Raises:
        ValueError: the file is not a JSON object; the message names it and what to run.
    """
    path = Path(sweep_dir) / PROFILE_JSON
    if not path.is_file():
        return None
    profile = _read_profile(path)
    if profile is None:
        raise ValueError(
            f"{path} is damaged (not a JSON object); rerun the sweep's command (python -m lade_bench.run ...) "
            f"to rebuild it from {PROFILES_DIR}/, or delete it to report without the device profile"
        )
    return profile


def repair_profile(sweep_dir: str | os.PathLike[str]) -> Path | None:
    """Give the sweep its ``device_profile.json`` again when it is missing or damaged but a kind's profile exists.

    A kill inside :func:`publish_profile` (after the kind's file, before the sweep's) or a damaged
    file would otherwise stay so: every later job finds the kind's profile and measures nothing.
    The damaged file is kept as ``device_profile.json.damaged``. Returns the file written, or None.
    """
    root = Path(sweep_dir)
    canonical = root / PROFILE_JSON
    if canonical.is_file() and _read_profile(canonical) is not None:
        return None
    kinds = [profile for path in sorted((root / PROFILES_DIR).glob("*.json")) if (profile := _read_profile(path))]
    if not kinds:
        return None
    if canonical.exists():
        with contextlib.suppress(FileNotFoundError):  # another job moved it away first
            os.replace(canonical, canonical.with_name(f"{PROFILE_JSON}.damaged"))
    _create_once(canonical, kinds[0])
    return canonical


def _read_profile(path: Path) -> dict[str, Any] | None:
    try:
        profile = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return profile if isinstance(profile, dict) else None


def record_device_profile(
    model: torch.nn.Module,
    sweep_dir: str | os.PathLike[str],
    lookahead_shapes: Iterable[tuple[int, int, int]] = (),
    **measure_kwargs: Any,
) -> Path:
    """Measure the curve for the sweep's (N, W, G) shapes and save it in the sweep directory.

    ``measure_kwargs`` go to :func:`measure_forward_curve`. Replaces the sweep's profile; the runner
    uses :func:`sweep_profile` and :func:`publish_profile` instead, which never replace it.
    """
    return save_profile(sweep_dir, sweep_profile(model, lookahead_shapes, **measure_kwargs))


def sweep_profile(
    model: torch.nn.Module, lookahead_shapes: Iterable[tuple[int, int, int]] = (), **measure_kwargs: Any
) -> dict[str, Any]:
    """Measure the curve over powers of two up to 256 tokens plus every shape's step width."""
    shapes = list(lookahead_shapes)
    largest = max([256, *((w + g) * (n - 1) for n, w, g in shapes)])
    return measure_forward_curve(model, default_token_counts(shapes, largest=largest), **measure_kwargs)


def forward_time_at(profile: Mapping[str, Any], tokens: float) -> float:
    """Forward time (s) at ``tokens`` new tokens: measured, or linear between measured neighbours.

    Raises:
        ValueError: ``tokens`` lies outside the measured range (no extrapolation).
    """
    ks = np.asarray(profile["token_counts"], dtype=np.float64)
    ts = np.asarray(profile["forward_time_s"], dtype=np.float64)
    if not ks[0] <= tokens <= ks[-1]:
        raise ValueError(
            f"the device profile covers {int(ks[0])}..{int(ks[-1])} tokens per forward pass, not {tokens}; "
            "measure it with token_counts that include every (W + G) * (N - 1) of the sweep"
        )
    value = float(np.interp(tokens, ks, ts))
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"device profile has a non-positive time at {tokens} tokens: {value}")
    return value


def step_cost(profile: Mapping[str, Any], tokens: float, token_time_s: float | None = None) -> float:
    """Forward time of a step with ``tokens`` input tokens in units of one AR token, ``t(k) / tau``.

    Args:
        profile: the device profile.
        tokens: input tokens of the step.
        token_time_s: ``tau``, AR's measured time per token; None: ``t(1)`` from the profile.

    Raises:
        ValueError: ``tokens`` is outside the profile's measured range, or ``token_time_s`` <= 0.
    """
    if token_time_s is None:
        token_time_s = forward_time_at(profile, 1)
    if not (math.isfinite(token_time_s) and token_time_s > 0):
        raise ValueError(f"token_time_s={token_time_s!r} must be a finite number of seconds > 0")
    return forward_time_at(profile, tokens) / token_time_s
