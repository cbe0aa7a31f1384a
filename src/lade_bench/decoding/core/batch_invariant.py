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
* :func:`chunk_linear_rows` splits every linear layer's rows into pieces of at most
  ``LINEAR_ROW_CHUNK`` rows, the largest row count measured to keep one kernel.

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

# The largest linear row count one GEMM kernel served on the Intel Xeon (AMX) in bfloat16; above it
# the kernel changed (docs/engine.md, "Batch invariance"). The load-time check re-measures it.
LINEAR_ROW_CHUNK = 32
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
    out = torch.stack(outputs).reshape(batch, heads, q_len, head_size)
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
    kv_len = key.shape[1]
    padded, index, shared = layout.padded, layout.index, layout.shared
    rows = query.reshape(kv_heads, groups * q_len, head_size)
    scores = torch.matmul(rows, key.transpose(1, 2)) * scale  # an element: one dot product, row-invariant
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    scores = scores.view(kv_heads, groups, q_len, kv_len)
    # A row whose visible keys are exactly its first ``count`` keys (AR, a prefill, a causal chunk)
    # is already compact; otherwise its visible keys are gathered, in key order, to the front.
    if index is None:
        compact = torch.nn.functional.pad(scores.float(), (0, padded - kv_len))
    else:
        compact = torch.gather(scores, 3, index.expand(kv_heads, groups, q_len, padded)).float()
    probs = torch.softmax(compact + layout.hidden, dim=-1).to(query.dtype)  # (kv heads, groups, q, padded)

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
            p_shared.transpose(1, 2), v_shared.reshape(kv_heads, shared, VALUE_BLOCK, head_size)
        )  # (kv heads, shared, groups * q, head size)
        partials.append(out_shared.reshape(kv_heads, shared, groups, q_len, head_size))
    own = blocks - shared
    if own and index is not None:
        v_own = value[:, index[:, shared * VALUE_BLOCK :]]  # (kv heads, q, own * block, head size)
        v_own = v_own.reshape(kv_heads, q_len, own, VALUE_BLOCK, head_size)
        p_own = probs[..., shared * VALUE_BLOCK :].reshape(kv_heads, groups, q_len, own, VALUE_BLOCK)
        out_own = torch.matmul(p_own.permute(0, 2, 3, 1, 4), v_own)  # (kv heads, q, own, groups, head size)
        partials.append(out_own.permute(0, 2, 3, 1, 4))
    stacked = torch.cat(partials, dim=1) if len(partials) > 1 else partials[0]
    return stacked.float().sum(dim=1).to(query.dtype)


def _all_visible_prefix(visible: torch.Tensor) -> int:
    """How many leading keys every query sees (the committed cache, for a step mask)."""
    every = visible.all(dim=0)
    if bool(every.all()):
        return int(every.shape[0])
    return int(torch.argmin(every.to(torch.int8)))


def _chunked_linear_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """A linear layer applied in pieces of at most ``LINEAR_ROW_CHUNK`` rows (one GEMM kernel each)."""
    rows = x.reshape(-1, x.shape[-1])
    if rows.shape[0] <= LINEAR_ROW_CHUNK:
        return nn.functional.linear(x, self.weight, self.bias)
    pieces = [nn.functional.linear(piece, self.weight, self.bias) for piece in rows.split(LINEAR_ROW_CHUNK)]
    return torch.cat(pieces).reshape(*x.shape[:-1], -1)


def chunk_linear_rows(model: nn.Module) -> int:
    """Make every ``nn.Linear`` of ``model`` compute at most ``LINEAR_ROW_CHUNK`` rows per GEMM; the count."""
    count = 0
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.forward = types.MethodType(_chunked_linear_forward, module)  # type: ignore[method-assign]
            count += 1
    return count


@dataclass(frozen=True)
class InvarianceReport:
    """What :func:`check_batch_invariance` ran: the linear shapes and attention cases, all identical."""

    linear_shapes: tuple[tuple[int, int], ...]
    linear_row_counts: tuple[int, ...]
    attention_cases: int


def check_batch_invariance(model: nn.Module, *, seed: int = 0) -> InvarianceReport:
    """Measure, on the model's own shapes and this device, that the path keeps every row identical.

    Each distinct linear shape runs random rows alone and inside every tested row count up to
    ``LINEAR_ROW_CHUNK`` (and, through the chunking, beyond it); the attention runs gapped tree-like
    steps, padded steps and many-row steps against each row attending alone to its compacted keys.

    Raises:
        BatchInvarianceError: the first difference found, naming the shape and the row count.
    """
    generator = torch.Generator().manual_seed(seed)
    weight = next(model.parameters())
    dtype, device = weight.dtype, weight.device
    shapes = sorted({(m.in_features, m.out_features) for m in model.modules() if isinstance(m, nn.Linear)})
    counts = (2, 3, 5, 8, 13, 16, 17, 24, 31, LINEAR_ROW_CHUNK, LINEAR_ROW_CHUNK + 1, 2 * LINEAR_ROW_CHUNK + 7)
    probe = nn.Linear(1, 1, bias=False)
    for n_in, n_out in shapes:
        probe.weight = nn.Parameter(_random((n_out, n_in), generator, dtype, device, 0.05), requires_grad=False)
        x = _random((max(counts), n_in), generator, dtype, device)
        with torch.no_grad():
            alone = torch.cat([_chunked_linear_forward(probe, x[i : i + 1]) for i in range(max(counts))])
            for rows in counts:
                together = _chunked_linear_forward(probe, x[:rows])
                if not torch.equal(together, alone[:rows]):
                    raise BatchInvarianceError(
                        f"this device's {str(dtype).removeprefix('torch.')} linear ({n_in} -> {n_out}) gives a row "
                        f"inside a {rows}-row step other bits than alone; step_path=batch_invariant cannot be "
                        "provided here, use step_path=standard"
                    )
    cases = _check_attention(model, generator, dtype, device)
    return InvarianceReport(tuple(shapes), counts, cases)


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
    chunk_linear_rows(model)
    return report


# The attribute of a model on the path that keeps what :func:`enable` replaced (a :class:`StandardPath`).
STANDARD_PATH_ATTRIBUTE = "_lade_standard_path"


@dataclass(frozen=True)
class StandardPath:
    """What :func:`enable` replaced on a model, kept on the model itself (one record per model, no global).

    Attributes:
        attention: the attention implementation the model was loaded with (e.g. ``sdpa``).
        linear_forwards: each ``nn.Linear``'s name -> its own instance ``forward`` before the path
            (None: it had none, its class's forward ran).
    """

    attention: str
    linear_forwards: dict[str, Callable[..., Any] | None]


def _remember_standard(model: nn.Module) -> None:
    """Keep on ``model`` what :func:`enable` is about to replace; only once, so that enabling a model
    already on the path never records the path itself as its standard one."""
    if getattr(model, STANDARD_PATH_ATTRIBUTE, None) is not None:
        return
    forwards = {
        name: module.__dict__.get("forward") for name, module in model.named_modules() if isinstance(module, nn.Linear)
    }
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
