"""Measuring the device: how long a forward pass takes as a function of the tokens it carries.

Measurement, not reporting: the runner records a profile once per sweep and (device kind, model,
dtype, attention implementation) (``device_profile``), the report reads it back to explain and predict speedups.
"""

from lade_bench.profiling.device_profile import (
    PROFILE_JSON,
    ProfileKey,
    StoredProfile,
    default_token_counts,
    describe_device,
    device_kind,
    forward_time_at,
    kv_range,
    load_profile,
    load_profiles,
    matching_profile,
    measure_forward_curve,
    measure_forward_surface,
    profile_measures_kv,
    record_device_profile,
    save_profile,
)

__all__ = [
    "PROFILE_JSON",
    "ProfileKey",
    "StoredProfile",
    "default_token_counts",
    "describe_device",
    "device_kind",
    "forward_time_at",
    "kv_range",
    "load_profile",
    "load_profiles",
    "matching_profile",
    "measure_forward_curve",
    "measure_forward_surface",
    "profile_measures_kv",
    "record_device_profile",
    "save_profile",
]
