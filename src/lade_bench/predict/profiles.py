"""``--profile`` files: read (refusing what is not a device profile) and matched to the sweep's models.

A profile is a forward-time curve of one model in one dtype: costing another model's steps, or the
same model's in another dtype, on it would predict a device nobody has. So each model of the sweep
gets exactly one profile, whose model (``profiling.device_profile.profile_model_matches``: by name or
by the last component of a checkpoint path) and dtype are that model's cells'; anything else is
refused in one line naming both sides, before any row is priced.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lade_bench.profiling.device_profile import kv_range, profile_measures_kv, profile_model_matches
from lade_bench.report.conditions import short_processor

# What the profile format guarantees (measure_forward_curve writes them all): the curve and its key's
# model and dtype. A JSON file without them is some other file.
_REQUIRED_FIELDS = ("token_counts", "forward_time_s", "model", "dtype")


class PredictError(ValueError):
    """A refusal of ``python -m lade_bench.predict``: one line naming the bad value and the fix."""


@dataclass(frozen=True)
class ProfileFile:
    """A device profile read from ``path`` (``profile``: the JSON object as stored)."""

    path: Path
    profile: dict[str, Any]

    @property
    def model(self) -> str:
        """The model the curve was measured on, as the profile recorded it."""
        return str(self.profile["model"])

    @property
    def dtype(self) -> str:
        """The weights' dtype the curve was measured in (``float32``, ``bfloat16``...)."""
        return str(self.profile["dtype"]).removeprefix("torch.")

    @property
    def device(self) -> str:
        """The device kind the curve describes (``cpu x86_64 (1 threads)``, ``cuda NVIDIA H200``)."""
        return str(self.profile.get("device_kind") or self.profile.get("device") or "an unnamed device")

    def heading(self) -> str:
        """What every table predicted from this profile is headed with: device, file, model, dtype,
        threads and processor, and that the numbers are predicted, not measured."""
        threads = self.profile.get("threads")
        processor = str(self.profile.get("processor") or "")
        parts = [
            self.model,
            self.dtype,
            f"{threads} threads" if threads is not None else "threads not recorded",
            # An accelerator's profile names no CPU (its device kind names the chip).
            short_processor(processor) if processor else "no CPU processor recorded",
        ]
        return f"predicted for {self.device} from {self.path} ({', '.join(parts)}), not measured"

    def kv_text(self) -> str:
        """How the profile reads a step's cached context: over its measured grid, or at its one context."""
        if profile_measures_kv(self.profile):
            low, high = kv_range(self.profile)
            return f"each step read at its own KV length on the profile's measured grid ({low}..{high} tokens)"
        return (
            f"every step read at the profile's one context ({int(self.profile.get('context_tokens', 0))} tokens): "
            "it measured no KV-length grid"
        )


def read_profile_file(path: str | os.PathLike[str]) -> ProfileFile:
    """Read one ``--profile`` file.

    Raises:
        PredictError: no such file, not a JSON object, or a JSON object without a profile's curve,
            model and dtype (e.g. a summary or a tune record passed by mistake).
    """
    where = Path(path)
    if not where.is_file():
        raise PredictError(f"no profile file at {where}; pass a device profile JSON (a sweep's device_profiles/*.json)")
    try:
        profile = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError) as why:
        raise PredictError(f"{where} is not a device profile: not readable JSON ({why})") from None
    if not isinstance(profile, dict):
        raise PredictError(f"{where} is not a device profile: a JSON {type(profile).__name__}, not an object")
    missing = [name for name in _REQUIRED_FIELDS if not profile.get(name)]
    counts, times = profile.get("token_counts"), profile.get("forward_time_s")
    if missing or not isinstance(counts, list) or not isinstance(times, list) or len(counts) != len(times):
        lacking = ", ".join(missing) or "token_counts / forward_time_s of one length"
        raise PredictError(
            f"{where} is not a device profile measured by the suite (it lacks {lacking}; its fields: "
            f"{', '.join(sorted(profile)) or 'none'}); pass a sweep's device_profiles/*.json or the GPU check's "
            "device_profile_<model>.json"
        )
    return ProfileFile(where, profile)


def match_profiles(
    profiles: Sequence[ProfileFile], cells: Mapping[tuple[str, str], tuple[str, str, Iterable[str]]]
) -> dict[str, ProfileFile]:
    """The one profile of each model of the sweep.

    Args:
        profiles: the ``--profile`` files, read.
        cells: each cell ``(sweep, cell_id)`` -> (its model, its dtype, other names of its model such as
            the config's ``name_or_path``).

    Returns:
        model -> its profile.

    Raises:
        PredictError: a profile of a model the rows do not hold, or of another dtype than the model's
            cells; two profiles of one model; a model without a profile (all missing ones named).
    """
    dtypes: dict[str, set[str]] = {}
    names: dict[str, set[str]] = {}
    for model, dtype, aliases in cells.values():
        dtypes.setdefault(model, set()).add(dtype)
        names.setdefault(model, {model}).update(str(a) for a in aliases if a)

    def rows_text(models: Iterable[str]) -> str:
        return ", ".join(f"model {m} {'/'.join(sorted(dtypes[m]))}" for m in sorted(models))

    chosen: dict[str, ProfileFile] = {}
    for found in profiles:
        matched = [m for m in sorted(dtypes) if profile_model_matches(found.profile, names[m])]
        described = f"profile {found.path} is for model {found.model} {found.dtype}"
        if not matched:
            raise PredictError(f"{described}, rows are {rows_text(dtypes)}")
        model = matched[0]
        if dtypes[model] != {found.dtype}:
            raise PredictError(f"{described}, rows are {rows_text([model])}; pass a profile measured in that dtype")
        if model in chosen:
            raise PredictError(
                f"two profiles for model {model}: {chosen[model].path} and {found.path}; pass one per model"
            )
        chosen[model] = found
    missing = sorted(set(dtypes) - set(chosen))
    if missing:
        raise PredictError(
            f"the rows hold {len(dtypes)} models ({', '.join(sorted(dtypes))}) and need a --profile per model; "
            f"none given for {', '.join(missing)}"
        )
    return chosen
