"""The device profile a tune's bounds and figure use: reused when one of its key covers the search space, else measured.

A profile is keyed by (device kind, model, dtype, attention implementation, compile mode, and on a
CPU the processor) (``profiling.device_profile.ProfileKey``); the tune's key is that of its cells. Where from, in order:
``tune.profile_from`` (a profile JSON file, or a sweep folder holding one of the tune's key), then
the tune folder's own (measured by an earlier run of this tune), else a fresh measurement on the
loaded model, saved in the tune folder as a sweep's would be
(``profiling.device_profile.publish_profile``). A reused profile must describe the tune's key and
cover the widest step of the search space; otherwise it is not used and the reason is logged (or,
for ``profile_from``, raised: the user asked for that one). A legacy profile (recorded before
profiles were keyed, without the attention implementation) serves only when the device kind,
model and dtype it recorded are the tune's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from lade_bench.decoding import LookaheadParams
from lade_bench.profiling.device_profile import (
    ProfileKey,
    default_token_counts,
    fitting_kv_lengths,
    key_profile_path,
    legacy_profile_matches,
    load_profiles,
    matching_profile,
    measure_forward_surface,
    profile_key,
    profile_measures_kv,
    publish_profile,
    save_profile,
    sweep_profile,
)
from lade_bench.tune.config import SearchSpace, TuneConfigError

log = logging.getLogger(__name__)


def profile_problem(
    profile: dict[str, Any], key: ProfileKey, largest_step: int, aliases: Iterable[str] = ()
) -> str | None:
    """Why ``profile`` cannot serve a tune of ``key`` up to ``largest_step`` tokens; None when it can."""
    own = profile_key(profile)
    if own is None:
        if not legacy_profile_matches(profile, key, {key.model, *aliases}):
            return (
                f"it is a legacy profile of {profile.get('model')!r} ({profile.get('dtype')}) on "
                f"{profile.get('device_kind')!r}, not of {key.describe()}"
            )
    elif own != key:
        return f"it describes {own.describe()}, not {key.describe()}"
    counts = profile.get("token_counts") or []
    if not counts or counts[0] > 1 or counts[-1] < largest_step:
        span = f"{counts[0]}..{counts[-1]}" if counts else "nothing"
        return f"it covers {span} tokens per forward pass, not 1..{largest_step}"
    return None


def obtain_profile(
    model: torch.nn.Module,
    key: ProfileKey,
    tune_dir: Path,
    space: SearchSpace,
    profile_from: Path | None,
    settings: Any,
    also: Sequence[LookaheadParams] = (),
    aliases: Iterable[str] = (),
) -> tuple[dict[str, Any], str]:
    """The profile to use and where it came from (``"reused <path>"`` or ``"measured ..."``).

    Args:
        model: the loaded model (measured only when nothing can be reused).
        key: the tune's profile key (its device kind, model, dtype, attention implementation).
        tune_dir: the tune folder (holds the measured profile).
        space: the search space (its widest step must be covered).
        profile_from: ``tune.profile_from``.
        settings: the ``device_profile`` config section (context, warm-up, repeats).
        also: further configurations run by the tune (reference presets) whose steps must be covered too.
        aliases: other names of the model (``model.name_or_path``), which legacy profiles recorded.

    Raises:
        TuneConfigError: ``profile_from`` cannot serve this tune (the message says why).
    """
    aliases = tuple(aliases)
    largest = max([space.largest_step(), *(p.tokens_per_step for p in also)])
    if profile_from is not None:
        path, profile = _profile_from(profile_from, key, aliases)
        problem = profile_problem(profile, key, largest, aliases)
        if problem:
            raise TuneConfigError(f"tune.profile_from={str(profile_from)!r} cannot be used: {problem}")
        # A copy, so the tune folder is complete on its own (its report); a legacy one stays legacy.
        if profile_key(profile) is None:
            save_profile(tune_dir, profile)
        else:
            publish_profile(tune_dir, profile)
        return profile, f"reused {path}"
    own = key_profile_path(tune_dir, key)
    if own.is_file():
        profile = json.loads(own.read_text(encoding="utf-8"))
        problem = profile_problem(profile, key, largest, aliases)
        if problem is None:
            return profile, f"reused {own}"
        log.info("not reusing %s: %s; measuring again", own, problem)
    log.info(
        "measuring forward time vs tokens per pass for %s (widest step of the tune: %d; once per tune folder)",
        key.describe(),
        largest,
    )
    shapes = [(max(space.ngram), max(space.window), max(space.guesses))]
    shapes += [(p.ngram, p.window, p.guesses) for p in also]
    profile = sweep_profile(model, shapes, **_measure_settings(settings, key))
    path = publish_profile(tune_dir, profile)
    return profile, f"measured, saved to {path}"


def obtain_surface(
    model: torch.nn.Module,
    key: ProfileKey,
    tune_dir: Path,
    largest_step: int,
    profile_from: Path | None,
    settings: Any,
    aliases: Iterable[str] = (),
) -> tuple[dict[str, Any], str]:
    """The two-dimensional profile (forward time over tokens per step and cached-context length) a
    step-cost search reads, and where it came from: ``profile_from``, the tune folder's own, or measured
    once on the loaded model over ``settings.kv_lengths`` (``device_profile``) and saved in the tune folder.

    Raises:
        TuneConfigError: ``profile_from`` cannot serve this tune: another key, too narrow, or measured at
            one context only (the step-cost model reads every step at its own KV length).
    """
    aliases = tuple(aliases)

    def problem_of(profile: dict[str, Any]) -> str | None:
        problem = profile_problem(profile, key, largest_step, aliases)
        if problem is None and not profile_measures_kv(profile):
            return "it was measured at one context only; the step-cost search needs device_profile.kv_lengths"
        return problem

    if profile_from is not None:
        path, profile = _profile_from(profile_from, key, aliases)
        problem = problem_of(profile)
        if problem:
            raise TuneConfigError(f"tune.profile_from={str(profile_from)!r} cannot be used: {problem}")
        publish_profile(tune_dir, profile)  # a copy, so the tune folder is complete on its own
        return profile, f"reused {path}"
    counts = default_token_counts(largest=max(256, largest_step))
    own = key_profile_path(tune_dir, key)
    if own.is_file():
        profile = json.loads(own.read_text(encoding="utf-8"))
        problem = problem_of(profile)
        wanted = set(fitting_kv_lengths(model, list(settings.kv_lengths), counts[-1]))
        if problem is None and not wanted <= set(profile.get("kv_lengths") or ()):
            problem = f"it measured KV lengths {profile.get('kv_lengths')}, not every one of {sorted(wanted)}"
        if problem is None:
            return profile, f"reused {own}"
        log.info("not reusing %s: %s; measuring again", own, problem)
    profile = measure_forward_surface(model, counts, list(settings.kv_lengths), **_measure_settings(settings, key))
    path = publish_profile(tune_dir, profile)
    return profile, f"measured over {len(counts)} widths x KV lengths {profile['kv_lengths']}, saved to {path}"


def _measure_settings(settings: Any, key: ProfileKey) -> dict[str, Any]:
    """How a tune measures a profile: the ``device_profile`` section's context, warm-up and repeats, and the
    key's model and attention implementation (recorded in the profile, so it is reused for this key only)."""
    return {
        "context_tokens": settings.context_tokens,
        "warmup": settings.warmup,
        "repeats": settings.repeats,
        "model_name": key.model,
        "attn_implementation": key.attn_implementation,
    }


def _profile_from(profile_from: Path, key: ProfileKey, aliases: Sequence[str]) -> tuple[Path, dict[str, Any]]:
    """The file ``tune.profile_from`` names, or the profile of ``key`` in the sweep folder it names."""
    if not profile_from.is_dir():
        return profile_from, json.loads(profile_from.read_text(encoding="utf-8"))
    stored = load_profiles(profile_from)
    found = matching_profile(stored, key, aliases)
    if found is None:
        listed = "; ".join(s.label() for s in stored) or "none"
        raise TuneConfigError(
            f"tune.profile_from={str(profile_from)!r} holds no device profile of {key.describe()} "
            f"(it holds: {listed}); point it at a sweep of this model, dtype and attention, or set it to null"
        )
    return found.path, found.profile
