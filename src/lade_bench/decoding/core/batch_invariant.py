"""The batch-invariant step path: every row of a forward bit-identical however many rows share it.

On a CPU in bfloat16 a row computed alone (AR's one-token step) and the same row inside a k-row
step (lookahead's window and verification rows, a draft tree) can round differently, and bfloat16
turns a last-bit difference into a flipped near-tie: the output then leaves AR's (issue 68;
docs/engine.md, "Batch invariance"). Measured on this project's CPUs, two places break invariance:

* **attention** (SDPA's fused CPU kernel, and eager attention's masked reductions): a query's
  result depends on how many queries share the call, on masked keys appended after its own and on
  where the mask's gaps put its visible keys;
* **linear layers** above a row count (32 rows in bfloat16 on the Intel Xeon with AMX): the GEMM
  switches kernels, so a row inside a 33-row step differs from the same row alone.

The path replaces both, for AR and for every method alike:

* :func:`batch_invariant_attention` (registered with transformers as ``lade_batch_invariant``)
  first *compacts* each query's visible keys, in key order, into a sequence of its own: for a
  valid step mask (one visible key per position, 0..p) that is exactly the sequence AR's row at
  position p attends to. Scores are one matmul (an element is a length-head-size dot product, the
  same for every row count), the softmax runs in float32 over the compacted scores padded with
  -inf at the end, and the value sum is a sum of fixed blocks of ``VALUE_BLOCK`` compacted keys,
  each block one matmul, the block partials added in float32 in block order. So a row's arithmetic
  depends only on its own compacted sequence, never on its neighbours, its gaps or its padding.
* :func:`chunk_linear_rows` splits every linear layer's rows into pieces of at most its row chunk:
  the most rows (up to ``LINEAR_ROW_CHUNK``) its shape's GEMM takes on this device with every row
  equal to the row alone, measured at load (:func:`measure_row_chunks`; 32 for every shape of the
  embedded models on the AMX Xeon, 1 for a tiny model's 32 -> 49152 head there).

Both rest on measured kernel behaviour, not on a guarantee, so :func:`check_batch_invariance` runs
the model's own shapes (each linear layer at every row count up to the chunk, the attention on
gapped, padded and multi-row steps against one-row references) before any row is timed, and the
cell is refused, naming the first difference, where this device cannot provide the property.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lade_bench.decoding.core.params import BATCH_INVARIANT_ATTENTION as ATTENTION_NAME

# The most rows a linear layer's GEMM takes on the path: one kernel served up to 32 rows of every
# embedded model's shape on the AMX Xeon in bfloat16 and changed above (docs/engine.md, "Batch
# invariance on the CPU"). Each shape's own chunk, at most this, is measured at load.
LINEAR_ROW_CHUNK = 32
# Draws of random rows each GEMM shape's row chunk is measured on (measure_row_chunks): at least
# MEASURE_DRAWS, up to MAX_MEASURE_DRAWS for shapes whose weight has at most MEASURE_DRAW_BUDGET / draws
# entries (a tiny model's 32 -> 128 layer gets the most, an embedded model's layers the least).
MEASURE_DRAWS = 2
MAX_MEASURE_DRAWS = 64
MEASURE_DRAW_BUDGET = 1 << 22
# The attribute of a GEMM layer (``nn.Linear``, ``Conv1D``) on the path that holds its measured row chunk.
ROW_CHUNK_ATTRIBUTE = "_lade_row_chunk"
# Keys per value block: 64-key blocks gave one kernel for every row count and for one-row batched
# calls in bfloat16; 32-key blocks did not (the per-row batched call took another kernel).
VALUE_BLOCK = 64
# The dtypes and devices the path is offered on: measured there, refused elsewhere.
SUPPORTED_DTYPES = (torch.bfloat16,)
SUPPORTED_DEVICES = ("cpu",)


class BatchInvarianceError(RuntimeError):
    """The device's kernels do not give the batch-invariant path its property (a measured difference)."""


def supported_message(device: str, dtype: str) -> str | None:
    """Why ``device``/``dtype`` cannot run the path, as one line naming the allowed ones; None when they can."""
    allowed_dtypes = [str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES]
    if device not in SUPPORTED_DEVICES:
        return (
            f"step_path=batch_invariant runs on {list(SUPPORTED_DEVICES)}, not device={device!r} (its kernels' "
            "row invariance is measured on the CPU only); use device=cpu, or step_path=standard"
        )
    if dtype not in allowed_dtypes:
        return (
            f"step_path=batch_invariant runs in {allowed_dtypes}, not dtype={dtype!r} (float32 matmuls take a "
            "one-row kernel for AR's step and another for two rows, so no fixed kernel is free there); "
            f"use dtype={allowed_dtypes[0]}, or step_path=standard"
        )
    return None


def register_attention() -> None:
    """Register :func:`batch_invariant_attention` (and its mask form) with transformers; idempotent."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(ATTENTION_NAME, batch_invariant_attention)
    # The eager (additive float) mask: never skipped for an implicit causal mask, so every step,
    # AR's included, hands the attention an explicit visibility.
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION_NAME, eager_mask)


@dataclass(frozen=True)
class _StepLayout:
    """What one step's visibility says, the same for every layer that shares its mask.

    Attributes:
        padded: compacted length, the longest row's visible key count rounded up to ``VALUE_BLOCK``.
        identity: every row's visible keys are exactly its first ``count`` keys (no gather needed).
        hidden: (q, padded) additive float32 mask of the compacted rows: 0 on a row's keys, -inf after.
        index: (q, padded) key index of each compacted slot (padding slots point at key 0), or None.
        shared: value blocks every row reads from the same keys (one stacked matmul).
    """

    padded: int
    identity: bool
    hidden: torch.Tensor
    index: torch.Tensor | None
    shared: int


def _step_layout(visible: torch.Tensor) -> _StepLayout:
    """The compaction of a (q, kv) visibility (see :class:`_StepLayout`)."""
    kv_len = visible.shape[1]
    counts = visible.sum(-1)
    blocks = -(-int(counts.max()) // VALUE_BLOCK)
    padded = blocks * VALUE_BLOCK
    slots = torch.arange(padded, device=visible.device)
    slot_used = slots[None, :] < counts[:, None]
    hidden = torch.zeros(slot_used.shape, dtype=torch.float32, device=visible.device).masked_fill(
        ~slot_used, float("-inf")
    )
    identity = padded >= kv_len and bool(torch.equal(visible, slot_used[:, :kv_len]))
    if identity:
        return _StepLayout(padded, True, hidden, None, blocks)
    order = torch.argsort((~visible).to(torch.int8), dim=-1, stable=True)[:, :padded]
    index = torch.nn.functional.pad(order, (0, padded - order.shape[1])).masked_fill(~slot_used, 0)
    shared = min(_all_visible_prefix(visible) // VALUE_BLOCK, blocks)
    return _StepLayout(padded, False, hidden, index, shared)


def _layouts(mask: torch.Tensor | None, q_len: int, kv_len: int, batch: int, device: torch.device) -> list[_StepLayout]:
    """Each batch entry's step layout; computed once per mask tensor and kept on it for the other layers."""
    # The version counter moves on any in-place change, so a mask edited in place is read afresh.
    key = (q_len, kv_len, batch, mask._version if mask is not None else None)
    kept = getattr(mask, "_lade_step_layouts", None) if mask is not None else None
    if kept is not None and kept[0] == key:
        return kept[1]
    visible = _visible(mask, q_len, kv_len, batch, device)
    layouts = [_step_layout(visible[b]) for b in range(batch)]
    if mask is not None:
        # The mask object is built once per forward and handed to every layer: keeping the layout on
        # it saves each later layer the argsort and gather-index work.
        mask._lade_step_layouts = (key, layouts)  # type: ignore[attr-defined]
    return layouts


def _visible(mask: torch.Tensor | None, q_len: int, kv_len: int, batch: int, device: torch.device) -> torch.Tensor:
    """(batch, q, kv) bool: which keys each query sees (a None mask: causal, queries last)."""
    if mask is None:
        rows = torch.arange(q_len, device=device)[:, None] + (kv_len - q_len)
        return (torch.arange(kv_len, device=device)[None, :] <= rows).expand(batch, q_len, kv_len)
    if mask.dtype == torch.bool:
        seen = mask
    else:
        # Additive masks: 0 where visible, the dtype's minimum or -inf where not.
        seen = mask > torch.finfo(mask.dtype).min / 2
    return seen[:, 0, -q_len:, -kv_len:].expand(batch, q_len, kv_len)


def batch_invariant_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention whose every query row is computed the same way whatever shares the call.

    Args:
        module: the attention layer (``num_key_value_groups`` is read for grouped-query heads).
        query: (batch, heads, q, head size).
        key, value: (batch, kv heads, kv, head size), the cache and this step's entries.
        attention_mask: (batch, 1, q, kv) additive float or bool visibility, or None (causal).
        scaling: the score scale (default head size ** -0.5).
        dropout: must be 0 (inference only).
        kwargs: ``softcap`` (Gemma-2 style logit soft-capping) is honoured; ``sinks`` is refused.

    Returns:
        (batch, q, heads, head size) output and None (no attention weights are kept).
    """
    if kwargs.get("sinks") is not None:
        raise BatchInvarianceError("step_path=batch_invariant has no attention-sink support; use step_path=standard")
    if dropout:
        raise BatchInvarianceError(f"step_path=batch_invariant runs inference only, not dropout={dropout!r}")
    batch, heads, q_len, head_size = query.shape
    kv_heads, kv_len = key.shape[1], key.shape[2]
    scale = head_size**-0.5 if scaling is None else scaling
    layouts = _layouts(attention_mask, q_len, kv_len, batch, query.device)
    # Grouped-query heads fold into rows: a kv head's query heads are rows of one matmul, so keys and
    # values are never copied per query head (row counts do not change a row's bits, see the check).
    folded = query.reshape(batch, kv_heads, heads // kv_heads, q_len, head_size)
    softcap = kwargs.get("softcap")
    outputs = [_one_sequence(folded[b], key[b], value[b], layouts[b], scale, softcap) for b in range(batch)]
    # The value head size may differ from the query's (DeepSeek's multi-head latent attention).
    out = torch.stack(outputs).reshape(batch, heads, q_len, value.shape[-1])
    return out.transpose(1, 2).contiguous(), None


def _one_sequence(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    layout: _StepLayout,
    scale: float,
    softcap: float | None,
) -> torch.Tensor:
    """(kv heads, groups, q, head size) attention output of one batch entry (:func:`batch_invariant_attention`).

    ``query``: (kv heads, groups, q, head size); ``key``/``value``: (kv heads, kv, head size).
    """
    kv_heads, groups, q_len, head_size = query.shape
    value_size = value.shape[-1]
    kv_len = key.shape[1]
    padded, index, shared = layout.padded, layout.index, layout.shared
    rows = query.reshape(kv_heads, groups * q_len, head_size)
    scores = torch.matmul(rows, key.transpose(1, 2)) * scale  # an element: one dot product, row-invariant
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    scores = scores.view(kv_heads, groups, q_len, kv_len)
    probs = _compact_softmax(scores, layout)  # (kv heads, groups, q, padded)

    # Value blocks: those every row reads from the same keys (a compact row's all, else the
    # all-visible prefix's) take one matmul with the rows stacked; the rest gather each row's own
    # keys and take one matmul per (row, block). Block partials are added in float32, in block order.
    blocks = padded // VALUE_BLOCK
    partials = []
    if shared:
        v_shared = value[:, : shared * VALUE_BLOCK]
        if v_shared.shape[1] < shared * VALUE_BLOCK:
            v_shared = torch.nn.functional.pad(v_shared, (0, 0, 0, shared * VALUE_BLOCK - v_shared.shape[1]))
        p_shared = probs[..., : shared * VALUE_BLOCK].reshape(kv_heads, groups * q_len, shared, VALUE_BLOCK)
        out_shared = torch.matmul(
            p_shared.transpose(1, 2), v_shared.reshape(kv_heads, shared, VALUE_BLOCK, value_size)
        )  # (kv heads, shared, groups * q, head size)
        partials.append(out_shared.reshape(kv_heads, shared, groups, q_len, value_size))
    own = blocks - shared
    if own and index is not None:
        v_own = value[:, index[:, shared * VALUE_BLOCK :]]  # (kv heads, q, own * block, head size)
        v_own = v_own.reshape(kv_heads, q_len, own, VALUE_BLOCK, value_size)
        p_own = probs[..., shared * VALUE_BLOCK :].reshape(kv_heads, groups, q_len, own, VALUE_BLOCK)
        out_own = torch.matmul(p_own.permute(0, 2, 3, 1, 4), v_own)  # (kv heads, q, own, groups, head size)
        partials.append(out_own.permute(0, 2, 3, 1, 4))
    stacked = torch.cat(partials, dim=1) if len(partials) > 1 else partials[0]
    return stacked.float().sum(dim=1).to(query.dtype)


def _compact_softmax(scores: torch.Tensor, layout: _StepLayout) -> torch.Tensor:
    """(..., q, padded) probabilities of each row's visible keys, compacted, from (..., q, kv) scores.

    A row whose visible keys are exactly its first ``count`` keys (AR, a prefill, a causal chunk) is
    already compact; otherwise its visible keys are gathered, in key order, to the front. The softmax
    runs in float32 over the compacted row padded with -inf, so a row's probabilities depend on its
    own scores only; they come back in the scores' dtype, as eager attention's do.
    """
    kv_len, padded = scores.shape[-1], layout.padded
    if layout.index is None:
        compact = torch.nn.functional.pad(scores.float(), (0, padded - kv_len))
    else:
        compact = torch.gather(scores, -1, layout.index.expand(*scores.shape[:-1], padded)).float()
    return torch.softmax(compact + layout.hidden, dim=-1).to(scores.dtype)


def compact_probabilities(scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """The path's softmax of one step: (heads, q, kv) scaled scores and (q, kv) visibility -> (heads, q, padded)
    probabilities, slot j of row r the probability of row r's j-th visible key (0 past its last)."""
    return _compact_softmax(scores, _step_layout(visible))


def _all_visible_prefix(visible: torch.Tensor) -> int:
    """How many leading keys every query sees (the committed cache, for a step mask)."""
    every = visible.all(dim=0)
    if bool(every.all()):
        return int(every.shape[0])
    return int(torch.argmin(every.to(torch.int8)))


def row_gemm_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, module) of every layer that multiplies its input rows by a weight matrix in one GEMM:
    ``nn.Linear`` and transformers' ``Conv1D`` (GPT-2's attention and MLP)."""
    from transformers.pytorch_utils import Conv1D

    return [(name, m) for name, m in model.named_modules() if isinstance(m, (nn.Linear, Conv1D))]


def gemm_shape(module: nn.Module) -> tuple[int, int]:
    """(in features, out features) of a :func:`row_gemm_layers` layer."""
    if isinstance(module, nn.Linear):
        return (module.in_features, module.out_features)
    return (int(module.__dict__["nx"]), int(module.__dict__["nf"]))  # Conv1D keeps them as plain attributes


def _chunked_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The layer's own forward applied to pieces of at most its measured row chunk (one GEMM kernel each)."""
    chunk = getattr(self, ROW_CHUNK_ATTRIBUTE, LINEAR_ROW_CHUNK)
    rows = x.reshape(-1, x.shape[-1])
    forward = type(self).forward
    if rows.shape[0] <= chunk:
        return forward(self, x)
    pieces = [forward(self, piece) for piece in rows.split(chunk)]
    return torch.cat(pieces).reshape(*x.shape[:-1], -1)


def chunk_linear_rows(model: nn.Module, chunks: dict[tuple[str, int, int], int] | None = None) -> int:
    """Make every :func:`row_gemm_layers` layer of ``model`` compute at most its row chunk per GEMM; the count.

    Args:
        chunks: (layer class name, in features, out features) -> rows per GEMM, as
            :func:`measure_row_chunks` found them; None keeps each layer's chunk from before
            (``LINEAR_ROW_CHUNK`` for a layer never set).
    """
    layers = row_gemm_layers(model)
    for _, module in layers:
        if chunks is not None:
            setattr(module, ROW_CHUNK_ATTRIBUTE, chunks[(type(module).__name__, *gemm_shape(module))])
        module.forward = types.MethodType(_chunked_forward, module)  # type: ignore[method-assign]
    return len(layers)


def _probe(kind: type[nn.Module], n_in: int, n_out: int, generator: torch.Generator, dtype: torch.dtype, device: Any):
    """A layer of class ``kind`` and shape ``n_in -> n_out`` with random weights (no bias for nn.Linear)."""
    if kind is nn.Linear:
        probe: nn.Module = nn.Linear(n_in, n_out, bias=False)
    else:
        probe = kind(n_out, n_in)  # Conv1D(nf, nx)
    with torch.no_grad():
        for parameter in probe.parameters():
            parameter.copy_(_random(tuple(parameter.shape), generator, torch.float32, "cpu", 0.05))
    return probe.to(dtype=dtype, device=device)


def measure_row_chunks(
    layers: list[nn.Module], dtype: torch.dtype, device: Any, generator: torch.Generator
) -> dict[tuple[str, int, int], int]:
    """For each (class, shape) of ``layers``, the most rows (up to ``LINEAR_ROW_CHUNK``) one GEMM takes with every
    row's bits equal to that row computed alone, at every row count up to it; 1 (each row alone) where none does.

    Measured on random weights and rows of the shape: which kernel a GEMM takes depends on the shape and
    the device (32 -> 49152 in bfloat16 on the AMX Xeon differs at every count, 576 -> 49152 at none up
    to 32, every shape from 33), never on the values.
    """
    kinds = {(type(m).__name__, *gemm_shape(m)): type(m) for m in layers}
    chunks = {}
    for key in sorted(kinds):
        _, n_in, n_out = key
        probe = _probe(kinds[key], n_in, n_out, generator, dtype, device)
        forward = type(probe).forward
        chunk = LINEAR_ROW_CHUNK
        # Two kernels can agree on most inputs (a short reduction rounds alike in either order), so each
        # count is compared on several draws of rows: more where a draw costs little (the small shapes
        # whose short reductions agree most often), at least MEASURE_DRAWS.
        draws = min(MAX_MEASURE_DRAWS, max(MEASURE_DRAWS, MEASURE_DRAW_BUDGET // (n_in * n_out)))
        for _ in range(draws):
            x = _random((LINEAR_ROW_CHUNK, n_in), generator, dtype, device)
            with torch.no_grad():
                alone = torch.cat([forward(probe, x[i : i + 1]) for i in range(chunk)])
                for rows in range(2, chunk + 1):
                    if not torch.equal(forward(probe, x[:rows]), alone[:rows]):
                        chunk = rows - 1
                        break
        chunks[key] = chunk
    return chunks


@dataclass(frozen=True)
class InvarianceReport:
    """What :func:`check_batch_invariance` measured: each GEMM layer shape's row chunk, and the attention cases.

    Attributes:
        linear_shapes: every distinct (in features, out features) of the model's GEMM layers, per class.
        linear_kinds: each shape's layer class (``Linear``; ``Conv1D`` for GPT-2's), in the same order.
        linear_chunks: each shape's measured row chunk, in the same order.
        linear_row_counts: the row counts each shape was compared at (through its chunking).
        attention_cases: rows compared, inside gapped and padded steps, against the row alone.
    """

    linear_shapes: tuple[tuple[int, int], ...]
    linear_kinds: tuple[str, ...]
    linear_chunks: tuple[int, ...]
    linear_row_counts: tuple[int, ...]
    attention_cases: int

    def chunks(self) -> dict[tuple[str, int, int], int]:
        """(class, in, out) -> row chunk, the form :func:`chunk_linear_rows` takes."""
        keys = [(kind, *shape) for kind, shape in zip(self.linear_kinds, self.linear_shapes, strict=True)]
        return dict(zip(keys, self.linear_chunks, strict=True))


def check_batch_invariance(model: nn.Module, *, seed: int = 0) -> InvarianceReport:
    """Measure, on the model's own shapes and this device, that the path keeps every row identical.

    Each distinct GEMM layer shape gets its row chunk (:func:`measure_row_chunks`, which compares every row
    count up to it), then runs random rows alone and inside a step one row past ``LINEAR_ROW_CHUNK``
    through that chunking (whole pieces and a one-row last piece); the
    attention runs gapped tree-like steps, padded steps and many-row steps against each row attending
    alone to its compacted keys.

    Raises:
        BatchInvarianceError: the first difference found, naming the shape and the row count.
    """
    generator = torch.Generator().manual_seed(seed)
    weight = next(model.parameters())
    dtype, device = weight.dtype, weight.device
    layers = [module for _, module in row_gemm_layers(model)]
    kinds = {(type(m).__name__, *gemm_shape(m)): type(m) for m in layers}
    chunks = measure_row_chunks(layers, dtype, device, generator)
    # The counts up to the chunk were compared while measuring it; one step past every chunk (whole pieces
    # and a one-row last piece) checks the pieces themselves.
    beyond = LINEAR_ROW_CHUNK + 1
    counts = (*range(2, LINEAR_ROW_CHUNK + 1), beyond)
    keys = sorted(kinds)
    for key in keys:
        kind, n_in, n_out = key
        probe = _probe(kinds[key], n_in, n_out, generator, dtype, device)
        setattr(probe, ROW_CHUNK_ATTRIBUTE, chunks[key])
        x = _random((beyond, n_in), generator, dtype, device)
        with torch.no_grad():
            alone = torch.cat([_chunked_forward(probe, x[i : i + 1]) for i in range(beyond)])
            for rows in (beyond,):
                together = _chunked_forward(probe, x[:rows])
                if not torch.equal(together, alone[:rows]):
                    raise BatchInvarianceError(
                        f"this device's {str(dtype).removeprefix('torch.')} {kind} ({n_in} -> {n_out}) gives a row "
                        f"inside a {rows}-row step other bits than alone, in pieces of {chunks[key]} rows; "
                        "step_path=batch_invariant cannot be provided here, use step_path=standard"
                    )
    cases = _check_attention(model, generator, dtype, device)
    return InvarianceReport(
        tuple((n_in, n_out) for _, n_in, n_out in keys),
        tuple(kind for kind, _, _ in keys),
        tuple(chunks[key] for key in keys),
        counts,
        cases,
    )


def _random(shape: tuple[int, ...], generator: torch.Generator, dtype: torch.dtype, device: Any, scale: float = 1.0):
    return (torch.randn(shape, generator=generator) * scale).to(dtype=dtype, device=device)


def _check_attention(model: nn.Module, generator: torch.Generator, dtype: torch.dtype, device: Any) -> int:
    """Run gapped, padded and wide attention steps against one-row references; the number of cases."""
    config = getattr(model, "config", None)
    text = getattr(config, "text_config", None) or config
    heads = int(getattr(text, "num_attention_heads", 4))
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_size = int(getattr(text, "head_dim", None) or getattr(text, "hidden_size", 64) // heads)
    layer = nn.Module()  # the attention reads the head grouping from the shapes, not the layer
    cases = 0
    for cache, rows in ((5, 1), (63, 9), (64, 57), (130, 33), (200, 70)):
        total = cache + rows
        key = _random((1, kv_heads, total, head_size), generator, dtype, device)
        value = _random((1, kv_heads, total, head_size), generator, dtype, device)
        query = _random((1, heads, rows, head_size), generator, dtype, device)
        # A tree-like mask: each new row sees the cache, a random subset of earlier new rows, itself.
        visible = torch.zeros(rows, total, dtype=torch.bool)
        visible[:, :cache] = True
        for r in range(rows):
            earlier = torch.rand(r, generator=generator) < 0.4
            visible[r, cache : cache + r] = earlier
            visible[r, cache + r] = True
        mask = torch.zeros(1, 1, rows, total, dtype=dtype, device=device).masked_fill(
            ~visible.to(device), float("-inf")
        )
        # Output (batch, q, heads, head size): batch entry 0, one (heads, head size) result per row.
        together = batch_invariant_attention(layer, query, key, value, mask)[0][0]
        for r in range(rows):
            keys = visible[r].nonzero().squeeze(1).to(device)
            alone = batch_invariant_attention(layer, query[:, :, r : r + 1], key[:, :, keys], value[:, :, keys], None)[
                0
            ][0, 0]
            if not torch.equal(alone, together[r]):
                raise BatchInvarianceError(
                    f"this device's {str(dtype).removeprefix('torch.')} attention ({heads} heads of {head_size}) "
                    f"gives row {r} of a {rows}-row step over {cache} cached keys other bits than alone; "
                    "step_path=batch_invariant cannot be provided here, use step_path=standard"
                )
            cases += 1
    return cases


def enable(model: nn.Module, check: bool = True) -> InvarianceReport | None:
    """Put ``model`` on the batch-invariant path: register and select the attention, chunk the linears.

    Args:
        model: a loaded transformers model (its ``config`` selects the attention).
        check: run :func:`check_batch_invariance` first and refuse the path on any difference.

    Raises:
        BatchInvarianceError: the device's kernels do not keep rows identical (from the check).
    """
    register_attention()
    report = check_batch_invariance(model) if check else None
    set_attention: Callable[[str], None] | None = getattr(model, "set_attn_implementation", None)
    if set_attention is None:
        raise BatchInvarianceError(f"{type(model).__name__} cannot switch its attention implementation")
    _remember_standard(model)
    set_attention(ATTENTION_NAME)
    chunk_linear_rows(model, report.chunks() if report is not None else None)
    return report


# The attribute of a model on the path that keeps what :func:`enable` replaced (a :class:`StandardPath`).
STANDARD_PATH_ATTRIBUTE = "_lade_standard_path"


@dataclass(frozen=True)
class StandardPath:
    """What :func:`enable` replaced on a model, kept on the model itself (one record per model, no global).

    Attributes:
        attention: the attention implementation the model was loaded with (e.g. ``sdpa``).
        linear_forwards: each GEMM layer's (``row_gemm_layers``) name -> its own instance ``forward`` before the path
            (None: it had none, its class's forward ran).
    """

    attention: str
    linear_forwards: dict[str, Callable[..., Any] | None]


def _remember_standard(model: nn.Module) -> None:
    """Keep on ``model`` what :func:`enable` is about to replace; only once, so that enabling a model
    already on the path never records the path itself as its standard one."""
    if getattr(model, STANDARD_PATH_ATTRIBUTE, None) is not None:
        return
    forwards = {name: module.__dict__.get("forward") for name, module in row_gemm_layers(model)}
    attention = str(model.config._attn_implementation)  # type: ignore[union-attr]  # a transformers config
    setattr(model, STANDARD_PATH_ATTRIBUTE, StandardPath(attention, forwards))


@contextmanager
def standard_path(model: nn.Module) -> Iterator[nn.Module]:
    """Run ``model`` on its standard step path inside the block: the attention it was loaded with and
    the linear layers' own forwards; the batch-invariant path again on exit (even on an error).

    The ``ar_standard`` arm times plain AR this way beside the path's AR in a batch-invariant cell
    (issue 68: the path must not handicap AR). A model that :func:`enable` never touched is already
    on its standard path and is left as it is.
    """
    standard: StandardPath | None = getattr(model, STANDARD_PATH_ATTRIBUTE, None)
    if standard is None:
        yield model
        return
    set_attention: Callable[[str], None] = model.set_attn_implementation  # type: ignore[assignment]
    set_attention(standard.attention)
    for name, module in model.named_modules():
        if name in standard.linear_forwards:
            forward = standard.linear_forwards[name]
            if forward is None:
                module.__dict__.pop("forward", None)
            else:
                module.forward = forward  # type: ignore[method-assign]
    try:
        yield model
    finally:
        # The path's check already ran on this model and device when it was enabled.
        set_attention(ATTENTION_NAME)
        chunk_linear_rows(model)
