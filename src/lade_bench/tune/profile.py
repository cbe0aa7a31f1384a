"""The device profile a tune's bounds and figure use: reused when one covers the search space, else measured.

Where from, in order: ``tune.profile_from`` (a ``device_profile.json`` or a folder holding one, e.g.
a sweep's), then the tune folder's own (measured by an earlier run of this tune), else a fresh
measurement on the loaded model, saved in the tune folder as a sweep's would be
(``profiling.device_profile.publish_profile``). A reused profile must describe the same kind of
device and cover the widest step of the search space; otherwise it is not used and the reason is
logged (or, for ``profile_from``, raised: the user asked for that one).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from lade_bench.decoding import LookaheadParams
from lade_bench.profiling.device_profile import (
    PROFILE_JSON,
    device_kind,
    kind_profile_path,
    publish_profile,
    sweep_profile,
)
from lade_bench.tune.config import SearchSpace, TuneConfigError

log = logging.getLogger(__name__)


def profile_problem(profile: dict[str, Any], kind: str, largest_step: int) -> str | None:
    """Why ``profile`` cannot serve a tune on ``kind`` up to ``largest_step`` tokens; None when it can."""
    if profile.get("device_kind", kind) != kind:
        return f"it describes {profile.get('device_kind')!r}, not {kind!r}"
    counts = profile.get("token_counts") or []
    if not counts or counts[0] > 1 or counts[-1] < largest_step:
        span = f"{counts[0]}..{counts[-1]}" if counts else "nothing"
        return f"it covers {span} tokens per forward pass, not 1..{largest_step}"
    return None


def obtain_profile(
    model: torch.nn.Module,
    device: torch.device,
    tune_dir: Path,
    space: SearchSpace,
    profile_from: Path | None,
    settings: Any,
    also: Sequence[LookaheadParams] = (),
) -> tuple[dict[str, Any], str]:
    """The profile to use and where it came from (``"reused <path>"`` or ``"measured"``).

    Args:
        model: the loaded model (measured only when nothing can be reused).
        device: its device.
        tune_dir: the tune folder (holds the measured profile).
        space: the search space (its widest step must be covered).
        profile_from: ``tune.profile_from``.
        settings: the ``device_profile`` config section (context, warm-up, repeats).
        also: further configurations run by the tune (reference presets) whose steps must be covered too.

    Raises:
        TuneConfigError: ``profile_from`` cannot serve this tune (the message says why).
    """
    kind = device_kind(device)
    largest = max([space.largest_step(), *(p.tokens_per_step for p in also)])
    if profile_from is not None:
        path = profile_from / PROFILE_JSON if profile_from.is_dir() else profile_from
        profile = json.loads(path.read_text(encoding="utf-8"))
        problem = profile_problem(profile, kind, largest)
        if problem:
            raise TuneConfigError(f"tune.profile_from={str(profile_from)!r} cannot be used: {problem}")
        publish_profile(tune_dir, profile)  # a copy, so the tune folder is complete on its own (its report)
        return profile, f"reused {path}"
    own = kind_profile_path(tune_dir, kind)
    if own.is_file():
        profile = json.loads(own.read_text(encoding="utf-8"))
        problem = profile_problem(profile, kind, largest)
        if problem is None:
            return profile, f"reused {own}"
        log.info("not reusing %s: %s; measuring again", own, problem)
    log.info(
        "measuring forward time vs tokens per pass on %s (widest step of the tune: %d; once per tune folder)",
        kind,
        largest,
    )
    shapes = [(max(space.ngram), max(space.window), max(space.guesses))]
    shapes += [(p.ngram, p.window, p.guesses) for p in also]
    profile = sweep_profile(
        model,
        shapes,
        context_tokens=settings.context_tokens,
        warmup=settings.warmup,
        repeats=settings.repeats,
    )
    path = publish_profile(tune_dir, profile)
    return profile, f"measured, saved to {path}"
