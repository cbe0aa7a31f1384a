"""Which CPU a cell was timed on: its model, and the instruction-set features that set a dtype's speed.

The host name says nothing here (every machine of a pool may be called ``vm``), and two CPUs of one
architecture word time the same work differently: two machines of this workplace ran the same bf16
AR at 10.9-11.2 and 6.6 tokens/s (SmolLM2 HumanEval bf16 eager, 2026-12-02); whether a CPU has
native bfloat16 (AVX-512 BF16, AMX) is a likely reason. Each cell records this identity in its
manifest (``timing_conditions.processor``); a comparison across cells (one setting's AR against
another's) is only made between cells of one identity (``lade_bench.report.baselines``).
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
# The features that decide how a dtype's matrix products run on an x86 or Arm CPU (native or emulated
# half precision, vector width); the full flag list is long and varies with the kernel and hypervisor.
DTYPE_FEATURES = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
    "asimd",
    "sve",
    "bf16",
    "i8mm",
)
_FIELDS = {
    "model name": "model_name",
    "vendor_id": "vendor",
    "cpu family": "family",
    "model": "model",
    "stepping": "stepping",
}


def processor_identity(cpuinfo: Path = CPUINFO) -> dict[str, Any]:
    """This machine's CPU: ``model_name``, ``vendor``, ``family``, ``model``, ``stepping``, ``features``.

    Read from the first processor of ``cpuinfo`` (Linux); elsewhere only ``model_name`` (from
    :func:`platform.processor`) and ``machine`` are known and ``features`` is empty. ``features`` lists
    the members of :data:`DTYPE_FEATURES` the CPU reports, in that order.
    """
    identity: dict[str, Any] = {"machine": platform.machine(), "model_name": platform.processor() or None}
    flags: set[str] = set()
    try:
        first = cpuinfo.read_text(errors="replace").split("\n\n")[0]
    except OSError:
        first = ""
    for line in first.splitlines():
        name, _, value = (part.strip() for part in line.partition(":"))
        if name in _FIELDS and value:
            identity[_FIELDS[name]] = value
        elif name in ("flags", "Features"):
            flags = set(value.split())
    identity["features"] = [feature for feature in DTYPE_FEATURES if feature in flags]
    return identity


def processor_label(identity: Mapping[str, Any] | None) -> str | None:
    """A one-line name of a recorded identity, equal for two records of one CPU kind; None if unrecorded.

    E.g. ``"AMD EPYC (AuthenticAMD 25/17/1; avx2 avx512f avx512_bf16 avx512_vnni)"``.
    """
    if not identity:
        return None
    numbers = "/".join(str(identity.get(k, "?")) for k in ("family", "model", "stepping"))
    vendor = identity.get("vendor") or identity.get("machine") or "?"
    features = " ".join(identity.get("features") or []) or "no listed features"
    return f"{identity.get('model_name') or '?'} ({vendor} {numbers}; {features})"
