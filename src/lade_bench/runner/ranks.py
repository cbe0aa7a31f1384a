"""The ranks of a multi-device cell (torchrun): joining them, and rank 0 telling the others what to run.

Only rank 0 runs the cell (plan, samples, resume, rows, sinks); the other ranks ("followers") only
take part in the generations that need every rank: those of the arms whose method runs on every
rank (``Method.every_rank`` in ``lade_bench.methods``: lookahead parallelism when
``lookahead.devices`` > 1, tensor-parallel AR). Before each such generation rank 0
broadcasts a request (arm, prompt ids, seed, budget) on a gloo control group, so every rank runs the
same generations in the same order; "stop" ends a follower's cell. Requests go over gloo even when
the generations use NCCL, so a follower waiting between generations holds no GPU collective.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from lade_bench.decoding.lookahead.parallel import LookaheadGroup
from lade_bench.runner.rank_env import LOCAL_RANK_VAR as _LOCAL_RANK
from lade_bench.runner.rank_env import RanksError as RanksError
from lade_bench.runner.rank_env import launched_world_size as launched_world_size

log = logging.getLogger(__name__)


def rank_device(device: torch.device, devices: int) -> torch.device:
    """This rank's device: ``cuda:LOCAL_RANK`` for a multi-device CUDA cell, else ``device`` unchanged."""
    if devices > 1 and device.type == "cuda" and device.index is None:
        return torch.device("cuda", int(os.environ.get(_LOCAL_RANK, "0")))
    return device


@dataclass
class Ranks:
    """This process's place among the ranks of a multi-device cell.

    Attributes:
        rank, world_size: torchrun's RANK and WORLD_SIZE.
        backend: the backend of the generations' collectives ("nccl" on CUDA, "gloo" on CPU).
        lookahead: the group lookahead parallelism runs on (the default group).
        control: the gloo group rank 0's requests go over.
        in_step: True from rank 0's request until its generation returned; a failure then leaves the
            followers inside a collective, where no further request can reach them.
    """

    rank: int
    world_size: int
    backend: str
    lookahead: LookaheadGroup
    control: Any
    in_step: bool = field(default=False)

    @property
    def is_leader(self) -> bool:
        """Rank 0: the rank that runs the cell and writes every file."""
        return self.rank == 0

    def describe(self) -> dict[str, Any]:
        """What the manifest records."""
        return {"world_size": self.world_size, "backend": self.backend}

    def request(self, message: Sequence[Any]) -> None:
        """Rank 0: send ``message`` to every follower (they block in :meth:`receive` until it comes)."""
        self._exchange([list(message)])

    def receive(self) -> list[Any]:
        """A follower: wait for rank 0's next request."""
        box: list[Any] = [None]
        self._exchange(box)
        return box[0]

    def _exchange(self, box: list[Any]) -> None:
        try:
            dist.broadcast_object_list(box, src=0, group=self.control)
        except (RuntimeError, dist.DistBackendError) as exc:
            first_line = str(exc).splitlines()[0] if str(exc) else ""
            raise RanksError(
                f"rank {self.rank}/{self.world_size}: the request from rank 0 did not arrive: a rank failed or "
                f"exited, or distributed.timeout_s passed ({type(exc).__name__}: {first_line})"
            ) from exc


def join_ranks(devices: int, device: torch.device, timeout_s: float) -> Ranks | None:
    """Join (once per process) the process group torchrun set up; None for a single-device cell.

    Raises:
        RanksError: ``devices`` differs from the number of processes torchrun launched.
    """
    world = launched_world_size()
    if devices != world:
        how = (
            f"launch with: torchrun --nproc-per-node {devices} -m lade_bench.run ... lookahead.devices={devices}"
            if devices > 1
            else f"set lookahead.devices={world} (or launch without torchrun)"
        )
        raise RanksError(f"lookahead.devices={devices} but {world} process(es) were launched (WORLD_SIZE); {how}")
    if devices == 1:
        return None
    backend = "nccl" if device.type == "cuda" else "gloo"
    timeout = timedelta(seconds=timeout_s)
    if not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend, timeout=timeout)
    elif dist.get_backend() != backend:
        raise RanksError(
            f"this process already joined a {dist.get_backend()} group; "
            "a sweep cannot mix CPU and CUDA multi-device cells"
        )
    # Every rank joins each cell in the same order, so creating the control group here is collective-safe.
    control = dist.new_group(backend="gloo", timeout=timeout) if backend != "gloo" else None
    return Ranks(dist.get_rank(), dist.get_world_size(), backend, LookaheadGroup.world(), control)
