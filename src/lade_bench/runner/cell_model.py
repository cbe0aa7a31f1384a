"""What a cell's generations need besides the plan: the loaded model of each role, tokenizer, stop ids, ranks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lade_bench.methods import REPLICA
from lade_bench.runner.ranks import Ranks


@dataclass
class CellModel:
    """The loaded model(s) of a cell on this rank, keyed by model role.

    Attributes:
        models: model role (``Method.models``; the loaders are ``runner.roles``) -> the object that
            role loaded on this rank. A role absent here is not loaded on this rank (e.g. the draft on
            every rank but 0, the full replica on a rank that only serves tensor-parallel AR).
        tokenizer: the full model's tokenizer (set by the ``REPLICA`` role's loader; None without it).
        stop_ids: EOS ids that end a turn.
        ranks: this process's place in a multi-device cell (None: single device).
        compiled: a compiled cell's ``lade_bench.decoding.core.compiled.CompiledForwards``, one for the whole
            cell (warm-up included) and shared by its arms, so a shape compiled once is not compiled
            again; None: an eager cell.
        invariance: on ``step_path=batch_invariant``, what the path's load-time check measured on the
            full model (``decoding.core.batch_invariant.InvarianceReport``); None: the standard path.
    """

    models: dict[str, Any] = field(default_factory=dict)
    tokenizer: Any = None
    stop_ids: list[int] = field(default_factory=list)
    ranks: Ranks | None = None
    compiled: Any = None
    invariance: Any = None

    @property
    def model(self) -> Any:
        """The full model on this rank's device (role ``REPLICA``); None where it is not loaded."""
        return self.models.get(REPLICA)
