"""Lookahead parallelism (LP): one lookahead generation spread over the ranks of a process group.

:class:`ParallelExecutor` is this rank's executor on the engine's seam (``executor.py``); the
decoding loop (``lookahead.py``) is the same as on one device.

Every rank holds a full model replica and the same committed KV cache. Each step, rank k runs only
its share of the window columns and of the pool candidates (``shards.py``), so a step of many
tokens costs about one rank's share of the compute in wall time. Then:

1. all ranks all-gather their argmax predictions (cur's row, their columns' last level, their
   candidates' rows), padded to one fixed size; with sampling, the logits of cur's and the
   candidates' rows as well;
2. every rank runs the ordinary verification (``verify.py``) on those identical gathered values,
   with its own generator, seeded identically, so every rank accepts the same tokens, draws the same
   random numbers and updates its window and pool identically;
3. the rank that holds the winning candidate (rank 0 when nothing matched) broadcasts the cache
   entries of cur and of the accepted candidate tokens, and every rank commits exactly those.

The prefill runs on every rank; rank 0's logits and prompt cache entries are broadcast, so from the
first step on every rank's cache is bit-for-bit rank 0's (plus the owners' accepted entries): the
caches never drift, and each emitted token is computed from exactly the context it would be on one
device. The step count equals single-device lookahead's at the same (N, W, G) because the window,
pool and verification evolve identically.

A rank that fails or exits makes the next collective fail on every other rank (gloo: connection
closed; any backend: the process group's timeout), raised as :class:`LookaheadParallelError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from lade_bench.decoding.core.checks import attention_implementation_of, layer_attention_of
from lade_bench.decoding.core.executor import StepInput, StepOutput
from lade_bench.decoding.core.forward import CachedForward
from lade_bench.decoding.core.kv_cache import empty_entries, pack_entries, replace_tail
from lade_bench.decoding.core.masks import StepMasks
from lade_bench.decoding.core.timing import model_dtype
from lade_bench.decoding.lookahead.shards import ShardLayout, ShardLayoutCache, largest_share, share


class LookaheadParallelError(RuntimeError):
    """An exchange between the ranks of a parallel lookahead generation failed."""


@dataclass(frozen=True)
class LookaheadGroup:
    """The ranks sharing one lookahead generation.

    Attributes:
        rank: this process's rank in ``group``.
        world_size: number of ranks in ``group``.
        group: the torch.distributed process group; None: the default (world) group.
    """

    rank: int
    world_size: int
    group: Any = None

    @classmethod
    def world(cls) -> LookaheadGroup:
        """Every rank of the initialised default process group."""
        return cls(dist.get_rank(), dist.get_world_size())

    def global_rank(self, rank: int) -> int:
        """The global rank of group rank ``rank`` (what ``dist.broadcast`` takes as ``src``)."""
        return rank if self.group is None else dist.get_global_rank(self.group, rank)


@dataclass(frozen=True)
class ShardedStep(StepOutput):
    """A parallel step's gathered output plus this rank's share of it.

    Attributes:
        shard: this rank's part of the step (its layout and which candidates it verified).
    """

    shard: ShardLayout


class ParallelExecutor:
    """Runs each lookahead step as this rank's share, exchanged with the group (a ``StepExecutor``)."""

    def __init__(
        self, model: torch.nn.Module, ngram: int, verification: str, with_logits: bool, group: LookaheadGroup
    ) -> None:
        """Steps of ``model`` (this rank's full replica) for n-gram size ``ngram`` over ``group``.

        ``with_logits``: gather each step's logits too (sampling verification reads them).
        """
        if verification != "flat":
            # Splitting a trie over ranks would cut shared prefixes apart; candidates are sharded as
            # flat chains only.
            raise ValueError(
                f"lookahead.verification={verification!r} is not supported with lookahead "
                "parallelism (lookahead.devices > 1); allowed: 'flat'"
            )
        self._forward = CachedForward(model)
        # This rank's own forwards: its shares' input sizes and times.
        self.record = self._forward.record
        self._device = self._forward.device
        self._masks = StepMasks(layer_attention_of(model), self._device, attention_implementation_of(model))
        self._length = ngram - 1
        self._with_logits = with_logits
        self._group = group
        self._shards = ShardLayoutCache(self._length, group.rank, group.world_size, model_dtype(model), self._device)
        self._exchanges = 0
        # Tokens emitted so far, for error messages only (known from cur's position once prefilled).
        self._emitted = 0
        self._prompt_length = 0

    def prefill(self, ids: list[int], guesses: int) -> torch.Tensor:
        """The single-device prefill on every rank, then rank 0's logits and prompt entries everywhere."""
        cache = self._forward.cache
        logits = self._forward.prefill(ids, guesses).contiguous()
        self._broadcast(logits, 0)
        prompt_length = self._prompt_length = len(ids) - guesses
        if self._group.rank == 0:
            packed = pack_entries(cache, list(range(prompt_length)))
        else:
            packed = empty_entries(cache, prompt_length)
        self._broadcast(packed, 0)
        if self._group.rank != 0:
            replace_tail(cache, 0, packed, prompt_length)
        return logits

    def step(self, inputs: StepInput) -> ShardedStep:
        """This rank's share of the step, then the gathered predictions of all ranks."""
        self._emitted = inputs.position + 1 - self._prompt_length
        ranks, length = self._group.world_size, self._length
        columns, count = inputs.columns, len(inputs.candidates)
        shard = self._shards.get(inputs.levels, columns, count)
        layout = shard.layout
        step_ids = list(inputs.window_tokens)
        for candidate in inputs.candidates:
            step_ids.extend(candidate)
        logits = self._forward(
            [step_ids[i] for i in shard.input_indices],
            attention_mask=self._masks.build(layout, inputs.position),
            position_ids=(layout.position_offsets + inputs.position)[None, :],
            logits_to_keep=layout.logit_rows,
        )
        candidate_rows = [row for rows in layout.candidate_rows for row in rows]
        own_rows = [0, *layout.last_level_rows, *candidate_rows]
        width = 1 + largest_share(columns, ranks) + largest_share(count, ranks) * length
        mine = torch.zeros(width, dtype=torch.long, device=self._device)
        mine[: len(own_rows)] = logits[own_rows].argmax(dim=-1)
        table = self._all_gather(mine).tolist()

        # Rank 0's cur row decides the first token; the rest is concatenated in rank (= column,
        # candidate) order, which is the single-device order.
        last_level: list[int] = []
        predictions = [table[0][0]]
        for rank, row in enumerate(table):
            own_columns = len(share(columns, ranks, rank))
            own_candidates = len(share(count, ranks, rank))
            last_level += row[1 : 1 + own_columns]
            predictions += row[1 + own_columns : 1 + own_columns + own_candidates * length]
        rows = [[1 + i * length + t for t in range(length)] for i in range(count)]
        gathered_logits = self._gather_candidate_logits(logits, candidate_rows, count) if self._with_logits else None
        return ShardedStep(predictions, last_level, rows, gathered_logits, shard)

    def _gather_candidate_logits(self, logits: torch.Tensor, candidate_rows: list[int], count: int) -> torch.Tensor:
        """Logits of rank 0's cur row and every candidate row, in the order of ``step``'s predictions."""
        ranks, length = self._group.world_size, self._length
        mine = torch.zeros(
            1 + largest_share(count, ranks) * length, logits.shape[-1], dtype=logits.dtype, device=self._device
        )
        own_rows = [0, *candidate_rows]
        mine[: len(own_rows)] = logits[own_rows]
        gathered = self._all_gather(mine)
        parts = [gathered[0, :1]]
        for rank in range(ranks):
            parts.append(gathered[rank, 1 : 1 + len(share(count, ranks, rank)) * length])
        return torch.cat(parts)

    def commit(self, output: ShardedStep, position: int, winner: int, matched: int) -> None:
        """Every rank takes cur's and the accepted candidate tokens' entries from the winner's rank."""
        cache, shard = self._forward.cache, output.shard
        ranks, length = self._group.world_size, self._length
        count = len(output.candidate_rows)
        owner = 0
        if matched:
            owner = next(rank for rank in range(ranks) if winner in share(count, ranks, rank))
        if self._group.rank == owner:
            first = shard.layout.candidate_offset + (winner - shard.candidates.start) * length if matched else 0
            offsets = [0, *(first + t for t in range(matched))]
            packed = pack_entries(cache, [position + offset for offset in offsets])
        else:
            packed = empty_entries(cache, 1 + matched)
        self._broadcast(packed, owner)
        replace_tail(cache, position, packed, 1 + matched)

    def _broadcast(self, tensor: torch.Tensor, source: int) -> None:
        self._collective("broadcast", dist.broadcast, tensor, self._group.global_rank(source), group=self._group.group)

    def _all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(tensor) for _ in range(self._group.world_size)]
        self._collective("all_gather", dist.all_gather, parts, tensor, group=self._group.group)
        return torch.stack(parts)

    def _collective(self, name: str, function, *args, **kwargs) -> None:
        """Run one collective; a failure names this rank, the step and the likely cause."""
        self._exchanges += 1
        try:
            function(*args, **kwargs)
        except (RuntimeError, dist.DistBackendError) as exc:
            raise LookaheadParallelError(
                f"rank {self._group.rank}/{self._group.world_size}: {name} #{self._exchanges} of a parallel "
                f"lookahead generation (after {self._emitted} tokens) failed: another rank failed or exited, or "
                f"the collective timeout passed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            ) from exc
