"""How long one forward pass takes on this device as a function of the tokens it carries.

Lookahead trades steps for wider steps: a step with ``(W + G) * (N - 1)`` input tokens replaces
several one-token AR steps. Whether that pays off depends on how flat the forward-time curve is, and
the curve depends on the model as much as on the device (a 270M model is not a 135M one), so a
profile is keyed by :class:`ProfileKey` (device kind, model, dtype, attention implementation, compile
mode and, on a CPU, the processor: a sweep's sittings may land on machines with other CPUs). It is
measured once per sweep and key, by the job that holds the key's lock, and stored beside the sweep
index as ``device_profiles/<key slug>.json``. The report predicts each cell's speedups from the
profile whose key is the cell's (the step-cost model, ``report.step_cost_check``); a cell with no
matching profile gets no prediction, never one from another model's curve.

Sweeps recorded before profiles were keyed (version 1) hold ``device_profiles/<device kind>.json``
and ``device_profile.json``, measured on whichever model ran first and without the attention
implementation. They are read as *legacy* profiles (:class:`StoredProfile`, ``key`` None): labelled
so wherever shown, and used for a cell only when the device kind, model and dtype they recorded are
the cell's (:func:`matching_profile`).

Measurement (nanoGPT-style benchmark discipline): a fixed random context is prefilled into a KV
cache once; then for each k, ``warmup`` untimed and ``repeats`` timed forward passes with k new
tokens on top of it, each device-synchronised, the cache cropped back after every pass; the median
of the timed passes is kept. The passes use the model's ordinary causal mask; lookahead's custom 4D
mask costs the same attention FLOPs for the same number of tokens.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lade_bench.profiling.processor import processor_identity, processor_label
from lade_bench.results.atomic import atomic_write_json
from lade_bench.results.sweep_layout import PROFILE_JSON, PROFILES_DIR

# torch, transformers and the decoding engine are imported only by the functions that measure: the
# report, its notebooks and the statistics read stored profiles, and a process that only reads them
# should not spend seconds importing torch (each report CLI run and notebook kernel did).
if TYPE_CHECKING:
    import torch

    from lade_bench.decoding.core.compiled import CompiledForwards

# 2: keyed by (device kind, model, dtype, attention implementation); 1: per device kind.
PROFILE_VERSION = 2
# A profile key's compile mode when the forwards run eager (the only mode before compile=true).
EAGER = "eager"
# Joins the key's parts in a file name; kind_slug never produces it, so keyed and legacy names differ.
_KEY_SEPARATOR = "--"


@dataclass(frozen=True)
class ProfileKey:
    """What a forward-time curve describes: one model, in one dtype and attention implementation, on one device kind.

    Attributes:
        device_kind: :func:`device_kind` of the device, e.g. ``"cuda NVIDIA H200"``.
        model: the model's name as the cells record it (``model.name``, e.g. ``"tiny-llama"``).
        dtype: torch dtype without its prefix, e.g. ``"float64"``.
        attn_implementation: the configured attention implementation, e.g. ``"sdpa"``.
        compile_mode: ``"eager"``, or the torch.compile mode of a compiled run (static cache,
            compiled forward), e.g. ``"default"``: compiled and eager forwards cost differently.
        processor: on a CPU, :func:`device_processor` (the CPU's model and dtype features), since
            two CPUs of one architecture word and thread count time one forward differently; ``""``
            on an accelerator (its device kind names the chip) and in records made before it was keyed.
    """

    device_kind: str
    model: str
    dtype: str
    attn_implementation: str
    compile_mode: str = EAGER
    processor: str = ""

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ProfileKey | None:
        """The key a profile (or a manifest's ``device_profile_key``) states; None when any part is missing.

        A record without ``compile_mode`` predates the compiled mode, so it is eager; one without
        ``processor`` predates the processor in the key, so its processor is ``""``.
        """
        required = [f.name for f in fields(cls) if f.name not in _OPTIONAL_KEY_PARTS]
        values = [record.get(name) for name in required]
        if not all(isinstance(v, str) and v for v in values):
            return None
        return cls(
            **{name: str(value) for name, value in zip(required, values, strict=True)},
            compile_mode=str(record.get("compile_mode") or EAGER),
            processor=str(record.get("processor") or ""),
        )

    def as_record(self) -> dict[str, str]:
        """The key as a JSON object (what profiles and manifests store)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def slug(self) -> str:
        """File-name-safe form, e.g. ``cpu-x86-64-2-threads--tiny-llama--float64--sdpa--cpu-3f2a...``.

        Eager keys keep the name they had before the compiled mode, and keys without a processor the
        name they had before it, so their stored profiles are still found. The processor enters as a
        short digest of its label (the label itself is long; the profile file states it in full).
        """
        parts = [getattr(self, f.name) for f in fields(self) if f.name not in _OPTIONAL_KEY_PARTS]
        if self.compile_mode != EAGER:
            parts.append(f"compiled-{self.compile_mode}")
        if self.processor:
            parts.append(f"cpu-{hashlib.sha256(self.processor.encode()).hexdigest()[:12]}")
        return _KEY_SEPARATOR.join(kind_slug(part) for part in parts)

    def describe(self) -> str:
        """``tiny-llama (float64, sdpa) on cpu x86_64 (2 threads), <processor>``; compiled keys say so."""
        mode = "" if self.compile_mode == EAGER else f", compiled {self.compile_mode}"
        where = f"{self.device_kind}, {self.processor}" if self.processor else self.device_kind
        return f"{self.model} ({self.dtype}, {self.attn_implementation}{mode}) on {where}"


# Parts of a key that older records lack; they default rather than make the record keyless.
_OPTIONAL_KEY_PARTS = ("compile_mode", "processor")


@dataclass(frozen=True)
class StoredProfile:
    """A profile read from a sweep folder, with where it came from.

    Attributes:
        profile: the profile as stored (``token_counts``, ``forward_time_s``, ...).
        path: the file it was read from.
        key: its :class:`ProfileKey`; None for a legacy (per-device-kind) profile.
    """

    profile: dict[str, Any]
    path: Path
    key: ProfileKey | None

    @property
    def legacy(self) -> bool:
        """True for a profile recorded before profiles were keyed (no attention implementation)."""
        return self.key is None

    def label(self) -> str:
        """What a figure's legend says: the key, or that it is a legacy per-device-kind profile and of what."""
        if self.key is not None:
            return self.key.describe()
        p = self.profile
        return (
            f"legacy per-device-kind profile: {p.get('model') or '?'} ({p.get('dtype') or '?'}, attention not "
            f"recorded) on {p.get('device_kind') or p.get('device') or '?'}"
        )


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
    attn_implementation: str | None = None,
    compiled: CompiledForwards | None = None,
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
        model_name: recorded in the profile (its key's model); defaults to the model config's
            ``name_or_path``. The runner passes ``model.name``, which the cells record.
        attn_implementation: recorded as the key's attention implementation (the configured one);
            defaults to the one the model runs (``config._attn_implementation``).
        compiled: measure the compiled mode's forwards (a full-length static cache, the forward
            compiled for each k; the compile happens in the untimed warm-up, which is then at
            least one pass); None: eager on a dynamic cache.

    Returns:
        A JSON-serialisable profile: ``token_counts``, ``forward_time_s`` (median per k, seconds),
        ``context_tokens``, ``warmup``, ``repeats``, ``device``, the key's fields (``device_kind``,
        ``model``, ``dtype``, ``attn_implementation``), versions.

    Raises:
        ValueError: a k < 1, ``repeats < 1``, or a context that does not fit the model.
    """
    import torch
    from transformers import Cache

    from lade_bench.decoding.core.compiled import recompiles_allowed
    from lade_bench.decoding.core.kv_cache import engine_cache
    from lade_bench.decoding.core.static_step import full_static_cache
    from lade_bench.decoding.core.timing import Stopwatch, cache_argument_name, model_device, model_dtype

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
        if compiled is None:
            cache: Cache = engine_cache(model)  # the cache the timed engine forwards run on
            forward: Any = model
        else:
            cache = full_static_cache(model, compiled.cache_length(context_tokens + counts[-1]))
            forward = compiled.compiled_forward(model, "profile")
            warmup = max(warmup, 1)  # the first pass of each k compiles
        model(input_ids=context, use_cache=True, **{cache_arg: cache})
        with recompiles_allowed():
            for k in counts:
                new_ids = torch.randint(0, vocab, (1, k), generator=generator).to(device)
                positions = torch.arange(context_tokens, context_tokens + k, device=device)[None, :]
                times = []
                for attempt in range(warmup + repeats):
                    clock.start()
                    forward(input_ids=new_ids, position_ids=positions, use_cache=True, **{cache_arg: cache})
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
        "processor": device_processor(device),
        "dtype": str(model_dtype(model)).removeprefix("torch."),
        "model": model_name or getattr(config, "name_or_path", "") or type(model).__name__,
        "attn_implementation": attn_implementation or str(getattr(config, "_attn_implementation", None) or "default"),
        # What the model ran, which "auto"-like settings leave to transformers.
        "attn_implementation_effective": str(getattr(config, "_attn_implementation", None)),
        "compile_mode": EAGER if compiled is None else compiled.mode_on(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def describe_device(device: torch.device) -> str:
    """Human-readable device, e.g. ``"cuda:0 NVIDIA H200"`` or ``"cpu x86_64 (16 threads)"``."""
    import torch

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


def device_processor(device: torch.device) -> str:
    """The processor part of a profile key on ``device``: the CPU's :func:`processor_label`, ``""`` off the CPU.

    Why it is keyed: a forward-time curve measured in one sitting of a sweep must not predict cells
    timed in a later sitting on another CPU (one workplace's machines ran identical bf16 AR work at
    6.6 and 11 tokens/s). On a GPU the device kind names the chip, and the host CPU is left out.
    """
    if device.type != "cpu":
        return ""
    return processor_label(processor_identity()) or ""


def device_kind_of_description(description: str) -> str:
    """The device kind a device description names (its index dropped), e.g. from a manifest's ``device``.

    Manifests before version 2 describe a CPU without the machine word (``cpu (2 threads)``);
    :func:`same_device_kind` compares such kinds with a profile's.
    """
    return re.sub(r"^(\w+):\d+", r"\1", description.strip())


def kind_slug(kind: str) -> str:
    """A file-name-safe form of a device kind, e.g. ``cuda-nvidia-h200``."""
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") or "device"


def kind_profile_path(sweep_dir: str | os.PathLike[str], kind: str) -> Path:
    """Where a legacy (version 1) sweep kept the profile of device kind ``kind``."""
    return Path(sweep_dir) / PROFILES_DIR / f"{kind_slug(kind)}.json"


def key_profile_path(sweep_dir: str | os.PathLike[str], key: ProfileKey) -> Path:
    """Where the profile of ``key`` is kept in a sweep folder: ``device_profiles/<key slug>.json``."""
    return Path(sweep_dir) / PROFILES_DIR / f"{key.slug()}.json"


def profile_key(profile: Mapping[str, Any]) -> ProfileKey | None:
    """The key a stored profile describes; None for a legacy profile (version 1: no attention implementation)."""
    if int(profile.get("version") or 1) < 2:
        return None
    return ProfileKey.from_record(profile)


def has_profile(sweep_dir: str | os.PathLike[str], key: ProfileKey) -> bool:
    """True when the sweep already has a readable profile of ``key``.

    Legacy profiles do not count: a run resuming an old sweep measures the keyed profile its cells
    need, as the legacy one may describe another model.
    """
    path = key_profile_path(sweep_dir, key)
    return path.is_file() and _read_profile(path) is not None


def publish_profile(sweep_dir: str | os.PathLike[str], profile: Mapping[str, Any]) -> Path:
    """Save ``profile`` (atomically) as its key's file in the sweep folder and return the path.

    Raises:
        ValueError: the profile states no complete key (version 2 with ``device_kind``, ``model``,
            ``dtype`` and ``attn_implementation``); :func:`measure_forward_curve` always writes one.
    """
    key = profile_key(profile)
    if key is None:
        stated = {name: profile.get(name) for name in ("version", *(f.name for f in fields(ProfileKey)))}
        raise ValueError(
            f"cannot publish a device profile without a complete key: it states {stated}; measure it with "
            "measure_forward_curve (version 2), or keep a legacy one with save_profile"
        )
    path = key_profile_path(sweep_dir, key)
    atomic_write_json(path, dict(profile))
    return path


def save_profile(sweep_dir: str | os.PathLike[str], profile: Mapping[str, Any]) -> Path:
    """Write ``profile`` atomically as ``<sweep_dir>/device_profile.json`` and return the path.

    The single-file layout of sweeps before version 2, kept for notebooks: :func:`load_profiles`
    reads it back as keyed when the profile states a key, as legacy otherwise.
    """
    path = Path(sweep_dir) / PROFILE_JSON
    atomic_write_json(path, dict(profile))
    return path


def load_profile(sweep_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The sweep's single ``device_profile.json`` (legacy layout), or None when it has none.

    Raises:
        ValueError: the file is not a JSON object; the message names it and what to run.
    """
    path = Path(sweep_dir) / PROFILE_JSON
    if not path.is_file():
        return None
    profile = _read_profile(path)
    if profile is None:
        raise ValueError(_damaged_message(path))
    return profile


def load_profiles(sweep_dir: str | os.PathLike[str]) -> list[StoredProfile]:
    """Every profile of a sweep folder: keyed ones first (by file name), then legacy ones.

    A legacy ``device_profile.json`` that repeats one of ``device_profiles/`` (it was a copy of the
    first kind's) is listed once.

    Raises:
        ValueError: a profile file is not a JSON object; the message names it and what to do.
    """
    root = Path(sweep_dir)
    paths = sorted((root / PROFILES_DIR).glob("*.json"))
    if (root / PROFILE_JSON).is_file():
        paths.append(root / PROFILE_JSON)
    stored: list[StoredProfile] = []
    for path in paths:
        profile = _read_profile(path)
        if profile is None:
            raise ValueError(_damaged_message(path))
        if any(s.profile == profile for s in stored):
            continue
        stored.append(StoredProfile(profile, path, profile_key(profile)))
    return sorted(stored, key=lambda s: s.legacy)  # stable: keyed first, each group in file order


def _damaged_message(path: Path) -> str:
    return (
        f"{path} is damaged (not a JSON object); rerun the sweep's command (python -m lade_bench.run ...), which "
        "sets it aside as .damaged and measures the profile again, or delete it to report without it"
    )


def matching_profile(
    stored: Sequence[StoredProfile], key: ProfileKey, aliases: Iterable[str] = ()
) -> StoredProfile | None:
    """The profile that describes ``key``: the keyed one with this exact key, else a matching legacy one.

    A legacy profile matches when the device kind, model and dtype it recorded are the key's (it
    recorded no attention implementation, so that part is not checked; the label says so). Its model
    was the checkpoint's ``name_or_path``, so it is compared with ``key.model`` and ``aliases`` (the
    cell's ``model.name_or_path``), as a whole or by its last path component. Returns None when
    nothing matches: no prediction from another model's curve.
    """
    for candidate in stored:
        if candidate.key == key:
            return candidate
    names = {key.model, *(str(a) for a in aliases if a)}
    for candidate in stored:
        if candidate.legacy and legacy_profile_matches(candidate.profile, key, names):
            return candidate
    return None


def legacy_profile_matches(profile: Mapping[str, Any], key: ProfileKey, model_names: Iterable[str]) -> bool:
    """True when a legacy profile recorded ``key``'s device kind, dtype and one of ``model_names``."""
    same_model = profile_model_matches(profile, model_names)
    same_kind = same_device_kind(str(profile.get("device_kind") or ""), key.device_kind)
    return same_model and same_kind and str(profile.get("dtype") or "") == key.dtype


def profile_model_matches(profile: Mapping[str, Any], model_names: Iterable[str]) -> bool:
    """Whether the model a profile recorded is one of ``model_names``, as a whole or by its last path
    component: a profile measured outside the runner (the GPU check, the legacy layout) records the
    checkpoint's ``name_or_path``, e.g. ``/root/.cache/lade_bench/smollm2-135m-instruct``."""
    model = str(profile.get("model") or "")
    names = set(model_names)
    return bool(model) and (model in names or Path(model).name in names)


def same_device_kind(a: str, b: str) -> bool:
    """Whether two device kinds name the same kind, the older manifests' CPU form included.

    Manifests before version 2 describe a CPU as ``cpu (16 threads)`` where profiles say
    ``cpu x86_64 (16 threads)``; both are compared without the machine word.
    """

    def loose(kind: str) -> str:
        return re.sub(r"^cpu \S+ \(", "cpu (", re.sub(r"^(\w+):\d+", r"\1", kind.strip()))

    return bool(a) and loose(a) == loose(b)


def repair_profile(sweep_dir: str | os.PathLike[str]) -> list[Path]:
    """Set damaged profile files aside (as ``<name>.damaged``) so that the next job measures them again.

    Profiles are written atomically, so a damaged one is a disk fault or a hand edit; left in place
    it would stop every report of the sweep. Returns the files set aside.
    """
    root = Path(sweep_dir)
    moved = []
    for path in [*sorted((root / PROFILES_DIR).glob("*.json")), root / PROFILE_JSON]:
        if path.is_file() and _read_profile(path) is None:
            with contextlib.suppress(FileNotFoundError):  # another job moved it away first
                os.replace(path, path.with_name(f"{path.name}.damaged"))
                moved.append(path)
    return moved


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

    ``measure_kwargs`` go to :func:`measure_forward_curve`. Writes the single-file layout
    (:func:`save_profile`, for notebooks); the runner publishes keyed profiles with
    :func:`publish_profile` instead.
    """
    return save_profile(sweep_dir, sweep_profile(model, lookahead_shapes, **measure_kwargs))


def sweep_profile(
    model: torch.nn.Module,
    lookahead_shapes: Iterable[tuple[int, int, int]] = (),
    kv_lengths: Sequence[int] | None = None,
    **measure_kwargs: Any,
) -> dict[str, Any]:
    """Measure the curve over powers of two up to 256 tokens plus every shape's step width.

    ``kv_lengths``: also measure the curve on each of these cached-context lengths
    (:func:`measure_forward_surface`); None or empty: the one context ``context_tokens`` only.
    """
    shapes = list(lookahead_shapes)
    largest = max([256, *((w + g) * (n - 1) for n, w, g in shapes)])
    counts = default_token_counts(shapes, largest=largest)
    if kv_lengths:
        return measure_forward_surface(model, counts, kv_lengths, **measure_kwargs)
    return measure_forward_curve(model, counts, **measure_kwargs)


def fitting_kv_lengths(model: torch.nn.Module, kv_lengths: Sequence[int], largest_step: int) -> list[int]:
    """The cached-context lengths of ``kv_lengths`` on which a ``largest_step``-token forward fits the
    model's positions (a profile grid asks for long contexts; a small test model has few positions)."""
    config: Any = model.config
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    wanted = sorted({int(kv) for kv in kv_lengths})
    if positions is None:
        return wanted
    return [kv for kv in wanted if kv + largest_step <= int(positions)]


def measure_forward_surface(
    model: torch.nn.Module,
    token_counts: Sequence[int],
    kv_lengths: Sequence[int],
    *,
    context_tokens: int = 128,
    **measure_kwargs: Any,
) -> dict[str, Any]:
    """Forward time over (tokens per step) x (cached-context length): :func:`measure_forward_curve` per length.

    A step's cost grows with the cache it attends to as well as with its width, and a generation's cache
    grows by every accepted token, so the step-cost model (``stats.step_cost``) reads both. The result is
    a profile whose ``token_counts`` / ``forward_time_s`` / ``context_tokens`` are the curve at
    ``context_tokens`` (what readers of one-context profiles use), plus ``kv_lengths`` (ascending) and
    ``forward_time_grid_s`` (one row of medians per KV length, over ``token_counts``). KV lengths that do
    not fit the model's positions beside the widest step are left out (:func:`fitting_kv_lengths`).

    Raises:
        ValueError: no KV length fits the model, or what :func:`measure_forward_curve` refuses.
    """
    counts = sorted({int(k) for k in token_counts})
    grid_lengths = sorted(set(fitting_kv_lengths(model, kv_lengths, counts[-1])) | {int(context_tokens)})
    if any(kv < 1 for kv in grid_lengths):
        raise ValueError(f"kv_lengths must be >= 1, got {list(kv_lengths)!r}")
    curves = {kv: measure_forward_curve(model, counts, context_tokens=kv, **measure_kwargs) for kv in grid_lengths}
    profile = dict(curves[int(context_tokens)])
    profile["kv_lengths"] = grid_lengths
    profile["forward_time_grid_s"] = [curves[kv]["forward_time_s"] for kv in grid_lengths]
    return profile


def profile_measures_kv(profile: Mapping[str, Any]) -> bool:
    """Whether ``profile`` measured the forward time over cached-context lengths (a grid), not at one context."""
    return len(profile.get("kv_lengths") or ()) >= 2 and "forward_time_grid_s" in profile


def kv_range(profile: Mapping[str, Any]) -> tuple[int, int]:
    """The cached-context lengths a profile measured: its grid's ends, or its one ``context_tokens`` twice."""
    if profile_measures_kv(profile):
        lengths = profile["kv_lengths"]
        return int(lengths[0]), int(lengths[-1])
    context = int(profile.get("context_tokens", 0))
    return context, context


def forward_time_at(profile: Mapping[str, Any], tokens: float, kv_length: float | None = None) -> float:
    """Forward time (s) at ``tokens`` new tokens: measured, or linear between measured neighbours.

    ``kv_length``: the cached-context length the step attends to. On a profile that measured a grid
    (:func:`profile_measures_kv`) the time is interpolated linearly in both tokens and KV length; on a
    one-context profile, or with None, it is the curve at the profile's ``context_tokens``.

    Raises:
        ValueError: ``tokens`` (or, on a grid, ``kv_length``) lies outside the measured range (no
            extrapolation).
    """
    ks = np.asarray(profile["token_counts"], dtype=np.float64)
    if not ks[0] <= tokens <= ks[-1]:
        raise ValueError(
            f"the device profile covers {int(ks[0])}..{int(ks[-1])} tokens per forward pass, not {tokens}; "
            "measure it with token_counts that include every (W + G) * (N - 1) of the sweep"
        )
    if kv_length is None or not profile_measures_kv(profile):
        value = float(np.interp(tokens, ks, np.asarray(profile["forward_time_s"], dtype=np.float64)))
    else:
        lengths = np.asarray(profile["kv_lengths"], dtype=np.float64)
        if not lengths[0] <= kv_length <= lengths[-1]:
            raise ValueError(
                f"the device profile covers cached contexts of {int(lengths[0])}..{int(lengths[-1])} tokens, "
                f"not {kv_length}; measure it with device_profile.kv_lengths that span the sweep's prompts "
                "plus max_new_tokens"
            )
        grid = np.asarray(profile["forward_time_grid_s"], dtype=np.float64)
        per_length = np.array([np.interp(tokens, ks, row) for row in grid])
        value = float(np.interp(kv_length, lengths, per_length))
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"device profile has a non-positive time at {tokens} tokens: {value}")
    return value


def forward_times_at(
    profile: Mapping[str, Any],
    tokens: Sequence[float] | np.ndarray,
    kv_lengths: Sequence[float] | np.ndarray | None = None,
) -> np.ndarray:
    """:func:`forward_time_at` of many steps at once: element ``i`` is ``forward_time_at(profile, tokens[i],
    kv_lengths[i])`` to the last bit (the same ``np.interp`` over the widths, then numpy's own interpolation
    formula over the KV lengths), priced in a few array operations instead of a Python call per step.

    Raises:
        ValueError: the first step outside the measured range, or with a non-positive time, with the
            message :func:`forward_time_at` gives for it.
    """
    widths = np.asarray(tokens)
    ks = np.asarray(profile["token_counts"], dtype=np.float64)
    wide = widths.astype(np.float64)
    bad = ~((ks[0] <= wide) & (wide <= ks[-1]))
    if kv_lengths is None or not profile_measures_kv(profile):
        values = np.interp(wide, ks, np.asarray(profile["forward_time_s"], dtype=np.float64))
    else:
        kv = np.asarray(kv_lengths, dtype=np.float64)
        lengths = np.asarray(profile["kv_lengths"], dtype=np.float64)
        bad |= ~((lengths[0] <= kv) & (kv <= lengths[-1]))
        values = _grid_times(profile, ks, lengths, np.where(bad, ks[0], wide), np.where(bad, lengths[0], kv))
    bad |= ~(np.isfinite(values) & (values > 0))
    if bad.any():
        # The scalar function raises the exact message for the first refused step.
        first = int(np.argmax(bad))
        forward_time_at(profile, widths[first], None if kv_lengths is None else float(kv_lengths[first]))
    return values


def _grid_times(
    profile: Mapping[str, Any], ks: np.ndarray, lengths: np.ndarray, widths: np.ndarray, kv: np.ndarray
) -> np.ndarray:
    """Bilinear times on a measured grid, every point inside it: each KV row interpolated over the widths
    (``np.interp``, as :func:`forward_time_at`), then numpy's interpolation formula over the KV lengths
    written out per step (``interp`` takes one curve, here every step has its own)."""
    grid = np.asarray(profile["forward_time_grid_s"], dtype=np.float64)
    per_length = np.stack([np.interp(widths, ks, row) for row in grid])  # (lengths, steps)
    last = len(lengths) - 1
    j = np.clip(np.searchsorted(lengths, kv, side="right") - 1, 0, max(last - 1, 0))
    steps = np.arange(len(kv))
    low, high = per_length[j, steps], per_length[np.minimum(j + 1, last), steps]
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (high - low) / (lengths[np.minimum(j + 1, last)] - lengths[j])
        between = slope * (kv - lengths[j]) + low
    # np.interp's special cases: a point on the last length takes its value, one on a measured length its own.
    out = np.where(kv == lengths[j], low, between)
    return np.where(kv >= lengths[last], per_length[last, steps], out)


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
