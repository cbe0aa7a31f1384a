"""What a Slurm cluster offers, read with ``scontrol``, and whether a launcher's request fits it.

sbatch refuses some impossible requests itself (a GPU on a cluster without one), but accepts others
that can never start: more CPUs per task than any node has leaves the job PENDING with
Reason=PartitionConfig forever. Checking the request against the partition's nodes before submitting
turns both into one message that names the setting and what the cluster offers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# ``Key=Value`` pairs of ``scontrol show ... -o``; a value may hold spaces (OS=Linux 6.1 ...), so it
# runs up to the next `` Key=``.
_PAIR = re.compile(r"(\w+)=(.*?)(?= \w+=|$)")
_UNLIMITED = ("UNLIMITED", "INFINITE", "NONE", "N/A", "")


class ClusterUnreadable(RuntimeError):
    """``scontrol`` is missing or did not answer: the request cannot be checked before submitting."""


@dataclass(frozen=True)
class Partition:
    """A partition and the nodes in it, as ``scontrol`` describes them (values as Slurm prints them)."""

    name: str
    default: bool
    state: str
    max_time_min: float | None  # None: unlimited
    max_cpus_per_node: int | None
    max_mem_per_node_mb: int | None
    nodes: list[dict[str, str]] = field(default_factory=list)

    def largest(self, key: str) -> int:
        """The largest integer value of ``key`` over the partition's nodes (0 without nodes)."""
        return max((_int(node.get(key)) or 0 for node in self.nodes), default=0)

    def gpus(self) -> int:
        """The most GPUs any node of the partition has (from its ``Gres``)."""
        return max((_gpus_in(node.get("Gres", "")) for node in self.nodes), default=0)

    def features(self) -> set[str]:
        """Every node feature in the partition (``AvailableFeatures``)."""
        found: set[str] = set()
        for node in self.nodes:
            found |= {f for f in node.get("AvailableFeatures", "").split(",") if f and f != "(null)"}
        return found

    def describe(self) -> str:
        """What the partition offers in one phrase, for messages."""
        return (
            f"partition {self.name}: {len(self.nodes)} node(s), at most {self.largest('CPUTot')} CPUs, "
            f"{self.largest('RealMemory') / 1024:.0f} GB and {self.gpus()} GPU(s) per node, "
            f"time limit {'unlimited' if self.max_time_min is None else f'{self.max_time_min:.0f} min'}"
        )


def read_partitions(env: Mapping[str, str] | None = None) -> dict[str, Partition]:
    """Every partition of the cluster with its nodes, from ``scontrol show partition/node -o``.

    Raises:
        ClusterUnreadable: ``scontrol`` is missing or failed (its message included).
    """
    partitions = {}
    for record in _scontrol(["show", "partition", "-o"], env):
        name = record.get("PartitionName", "")
        partitions[name] = Partition(
            name=name,
            default=record.get("Default") == "YES",
            state=record.get("State", "UP"),
            max_time_min=_minutes(record.get("MaxTime", "UNLIMITED")),
            max_cpus_per_node=_int(record.get("MaxCPUsPerNode")),
            max_mem_per_node_mb=_int(record.get("MaxMemPerNode")),
        )
    for node in _scontrol(["show", "node", "-o"], env):
        for name in node.get("Partitions", "").split(","):
            if name in partitions:
                partitions[name].nodes.append(node)
    return partitions


def request_problems(params: Mapping[str, Any], partitions: Mapping[str, Partition]) -> list[str]:
    """Each setting of ``params`` (the launcher's options) that no node of its partition can satisfy.

    Every problem names the setting as an override (``hydra.launcher.KEY=VALUE``) and what the
    partition offers instead. Checked: the partition exists (or a default does), CPUs per node, memory
    per node, GPUs per node, the time limit, and a single-word ``constraint``. Accounts and QOS are
    left to sbatch, whose refusal the launcher reports as it is.
    """
    wanted = params.get("partition")
    if wanted:
        names = [name.strip() for name in str(wanted).split(",")]
        missing = [name for name in names if name not in partitions]
        if missing:
            return [f"hydra.launcher.partition={wanted}: the cluster has no partition {', '.join(missing)}; it has "
                    f"{_names(partitions)}"]  # fmt: skip
        chosen = [partitions[name] for name in names]
    else:
        chosen = [p for p in partitions.values() if p.default]
        if not chosen:
            return [f"hydra.launcher.partition is not set and the cluster has no default partition; it has "
                    f"{_names(partitions)}"]  # fmt: skip
    # A request fits when one of the partitions it names can hold it (sbatch picks one that can).
    problems_per_partition = [_problems_in(params, partition) for partition in chosen]
    return [] if any(not problems for problems in problems_per_partition) else problems_per_partition[0]


def _room(largest_node: int, partition_cap: int | None) -> int:
    """What one node can give a job: its largest node's amount, under the partition's per-node cap."""
    return largest_node if partition_cap is None else min(largest_node, partition_cap)


def _problems_in(params: Mapping[str, Any], partition: Partition) -> list[str]:
    problems = []
    offer = partition.describe()
    tasks = int(params.get("tasks_per_node") or 1)
    cpus = int(params.get("cpus_per_task") or 1) * tasks
    cpu_room = _room(partition.largest("CPUTot"), partition.max_cpus_per_node)
    if cpus > cpu_room:
        problems.append(f"hydra.launcher.cpus_per_task={params.get('cpus_per_task')} (x tasks_per_node={tasks}): "
                        f"asks for {cpus} CPUs on one node; {offer}")  # fmt: skip
    if params.get("mem_gb"):
        mem_mb = int(params["mem_gb"]) * 1024  # sbatch --mem=<n>GB counts GB as 1024 MB
        room = _room(partition.largest("RealMemory"), partition.max_mem_per_node_mb)
        if mem_mb > room:
            problems.append(f"hydra.launcher.mem_gb={params['mem_gb']}: asks for {mem_mb} MB on one node, the "
                            f"largest node offers {room} MB; {offer}")  # fmt: skip
    gpus, setting = _gpus_wanted(params)
    if gpus > partition.gpus():
        hint = "; for cells on CPUs use hydra/launcher=slurm_cpu" if partition.gpus() == 0 else ""
        problems.append(f"{setting}: asks for {gpus} GPU(s) per node; {offer}{hint}")
    timeout = params.get("timeout_min")
    if timeout and partition.max_time_min is not None and float(timeout) > partition.max_time_min:
        problems.append(f"hydra.launcher.timeout_min={timeout}: above the partition's time limit; {offer}")
    constraint = params.get("constraint")
    if constraint and re.fullmatch(r"[\w.-]+", str(constraint)) and str(constraint) not in partition.features():
        available = ", ".join(sorted(partition.features())) or "none"
        problems.append(f"hydra.launcher.constraint={constraint}: no node of partition {partition.name} has that "
                        f"feature (features: {available})")  # fmt: skip
    if not partition.nodes:
        problems.append(f"partition {partition.name} has no nodes")
    return problems


def _gpus_wanted(params: Mapping[str, Any]) -> tuple[int, str]:
    """(GPUs per node the request needs, the setting that asks for them)."""
    if params.get("gpus_per_node"):
        return _int(params["gpus_per_node"]) or 1, f"hydra.launcher.gpus_per_node={params['gpus_per_node']}"
    if params.get("gres") and "gpu" in str(params["gres"]):
        return _gpus_in(str(params["gres"])), f"hydra.launcher.gres={params['gres']}"
    if params.get("gpus_per_task"):
        per_node = int(params["gpus_per_task"]) * int(params.get("tasks_per_node") or 1)
        return per_node, f"hydra.launcher.gpus_per_task={params['gpus_per_task']}"
    return 0, ""


def _gpus_in(gres: str) -> int:
    """GPUs in a Gres string: ``gpu:2``, ``gpu:a100:4(S:0-1)``, ``gpu:1,shard:4``; 0 for ``(null)``."""
    total = 0
    for item in gres.split(","):
        parts = re.sub(r"\(.*?\)", "", item).split(":")
        if parts[0] == "gpu":
            total += int(parts[-1]) if parts[-1].isdigit() else 1
    return total


def _scontrol(args: list[str], env: Mapping[str, str] | None) -> list[dict[str, str]]:
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise ClusterUnreadable("scontrol is not on PATH")
    try:
        done = subprocess.run(
            [scontrol, *args], capture_output=True, text=True, timeout=30, check=False, env=dict(env) if env else None
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClusterUnreadable(f"scontrol {' '.join(args)}: {exc}") from exc
    if done.returncode != 0:
        raise ClusterUnreadable(f"scontrol {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return [
        {key: value.strip() for key, value in _PAIR.findall(line)} for line in done.stdout.splitlines() if "=" in line
    ]


def _names(partitions: Mapping[str, Partition]) -> str:
    if not partitions:
        return "no partitions"
    return ", ".join(f"{name}{' (default)' if p.default else ''}" for name, p in partitions.items())


def _int(value: Any) -> int | None:
    text = str(value) if value is not None else ""
    return int(text) if text.isdigit() else None


def _minutes(value: str) -> float | None:
    """Slurm's time format ([days-]hours:minutes:seconds, minutes, ...) in minutes; None: unlimited."""
    if value.upper() in _UNLIMITED:
        return None
    days = 0
    if "-" in value:
        day_text, value = value.split("-", 1)
        days = int(day_text)
    parts = [int(p) for p in value.split(":")]
    if len(parts) == 1:  # minutes
        minutes = float(parts[0])
    elif len(parts) == 2:  # minutes:seconds, or hours:minutes after days-
        minutes = parts[0] * 60 + parts[1] if days else parts[0] + parts[1] / 60
    else:
        minutes = parts[0] * 60 + parts[1] + parts[2] / 60
    return days * 24 * 60 + minutes
