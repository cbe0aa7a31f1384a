"""Where rows stop being batch-invariant: each op of a real layer, a row alone against the same row in a step.

For one decoder layer's real inputs (:mod:`.capture`) and each step path (``standard``: the model as
loaded, SDPA attention; ``batch_invariant``: after :func:`lade_bench.decoding.core.batch_invariant.enable`),
every op computes:

* each row **alone**, as AR's one-token step computes it (one row; the attention: one query over
  the cache and itself, no mask, as transformers calls it for a single query);
* the same rows **inside a k-row step** (the k tokens after the cache, a causal chain whose mask the
  engine builds for a chain-shaped draft tree, ``layout.build_branch_layout``), for each k asked;
* the same rows **inside a lookahead step** (``layout.build_step_layout`` for N, W, G: the window's
  levels and G candidate chains at their own positions, under the step's tree mask).

Each comparison is bit for bit and gives the step's row count, how many of its rows differ from
alone in any bit and the largest absolute difference. The ops: every linear layer and norm of the
layer (query/key/value/output projections, MLP gate/up/down, input and post norms, Gemma-3's query/key
norms), the rotary embedding (its cos/sin at the rows' positions, applied to the query and key), the
attention under the step's mask, the softmax over a row's visible scores in each path's form (the
standard path's is eager attention's: float32 over the masked row; SDPA fuses its own, measured as
the attention), the final norm and the LM head.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from lade_bench.decoding.core import batch_invariant
from lade_bench.decoding.core.layout import StepLayout, build_branch_layout, build_step_layout
from lade_bench.decoding.core.masks import full_step_mask, sliding_step_mask
from lade_bench.profiling.batch_invariance.capture import LayerInputs, capture_layer_inputs

PATHS = ("standard", "batch_invariant")
# The row counts the account asks for: small steps, both sides of the linear chunk (32), wide steps.
ROW_COUNTS = (1, 2, 3, 4, 8, 16, 32, 33, 48, 64, 128)
# The lookahead shape of the tree step (N, W, G): the main job's.
TREE = (5, 7, 7)
# Tokens in the cache before a step's first row (the measurements had about 200).
CACHE_TOKENS = 200
# The record's columns, in order (one record: one op's one step shape on one path).
COLUMNS = ("path", "op", "step", "step_rows", "rows_differing", "max_abs_diff")
ROTARY, ATTENTION, SOFTMAX = "rotary", "attention", "softmax"

# A comparison's pairs: (the row inside the step, the same row alone), equal shapes.
Pairs = list[tuple[torch.Tensor, torch.Tensor]]


def tree_layout(tree: tuple[int, int, int], dtype: torch.dtype) -> StepLayout:
    """The layout of a steady-state lookahead step (N-1 levels of W columns, G chains of N-1 tokens)."""
    ngram, window, guesses = tree
    return build_step_layout(ngram - 1, window, guesses, ngram - 1, dtype, "cpu")


def chain_layout(rows: int, dtype: torch.dtype) -> StepLayout:
    """The layout of a causal k-row step: a chain-shaped draft tree (each token sees the ones before it)."""
    return build_branch_layout(1, 1, [-1, *range(rows - 1)], [], dtype, "cpu")


def tokens_needed(cache_tokens: int, row_counts: Sequence[int], tree: tuple[int, int, int]) -> int:
    """Prompt tokens the account reads: the cache, then the widest step's tokens."""
    ngram, window, guesses = tree
    return cache_tokens + max(*row_counts, (ngram - 1) * (window + guesses))


def difference(pairs: Pairs) -> tuple[int, float]:
    """(rows whose bits differ anywhere, largest absolute difference over all rows) of ``pairs``."""
    differing, largest = 0, 0.0
    for together, alone in pairs:
        if not torch.equal(_bits(together), _bits(alone)):
            differing += 1
            largest = max(largest, float((together.double() - alone.double()).abs().max()))
    return differing, largest


def _bits(values: torch.Tensor) -> torch.Tensor:
    # Bit patterns, so that a -0.0 against 0.0 counts as a difference too ("bit for bit").
    integer = {2: torch.int16, 4: torch.int32, 8: torch.int64}[values.element_size()]
    return values.contiguous().view(integer)


def _row_pairs(together: torch.Tensor, alone: Sequence[torch.Tensor], axis: int) -> Pairs:
    """Pair row j of ``together`` (rows along ``axis``) with ``alone[j]`` (one row along ``axis``)."""
    return [(together.narrow(axis, j, 1), alone[j]) for j in range(together.shape[axis])]


class StepAccount:
    """The comparisons of one layer's ops on one path: rows alone, in k-row steps and in a tree step.

    The step's first row is the prompt token at ``cache_tokens``; the k-row step holds the next k
    prompt tokens at their own positions; the tree step holds as many prompt tokens as the layout
    has, at the layout's positions (their hidden states are the model's, the geometry the step's).
    """

    def __init__(self, inputs: LayerInputs, cache_tokens: int, tree: tuple[int, int, int]) -> None:
        """Comparisons over ``inputs``, the step starting after ``cache_tokens`` cached tokens."""
        self.inputs = inputs
        self.start = cache_tokens
        self.dtype = inputs.query.dtype
        self.tree = tree_layout(tree, self.dtype)
        self.tree_label = "tree N{}W{}G{}".format(*tree)
        positions = torch.arange(inputs.tokens)
        self.query, self.key = self._rotate(slice(None), positions)
        self.tree_positions = self.tree.position_offsets.to(torch.long) + cache_tokens
        step = slice(cache_tokens, cache_tokens + self.tree.num_tokens)
        self.tree_query, tree_key = self._rotate(step, self.tree_positions)
        self.tree_key = torch.cat([self.key[:, :, :cache_tokens], tree_key], dim=2)
        self.tree_value = inputs.value[:, :, : cache_tokens + self.tree.num_tokens]
        # Each tree row's visible keys: the whole cache, then what the step's mask lets it see.
        cache = torch.ones(self.tree.num_tokens, cache_tokens, dtype=torch.bool)
        self.tree_visible = torch.cat([cache, self.tree.visible.cpu()], dim=1)

    def records(self, path: str, row_counts: Sequence[int]) -> list[dict[str, Any]]:
        """One record (:data:`COLUMNS`) per op and step: each k of ``row_counts``, then the tree step."""
        ops: dict[str, Callable[[int | None], Pairs]] = {
            name: self._row_op(module, x) for name, (module, x) in self.inputs.row_ops.items()
        }
        ops[ROTARY] = self._rotary
        ops[ATTENTION] = self._attention
        ops[SOFTMAX] = lambda rows: self._softmax(path, rows)
        found = []
        for name in sorted(ops, key=_op_order):
            for rows in [*row_counts, None]:
                differing, largest = difference(ops[name](rows))
                step = self.tree_label if rows is None else f"{rows} rows"
                size = self.tree.num_tokens if rows is None else rows
                found.append(dict(zip(COLUMNS, (path, name, step, size, differing, largest), strict=True)))
        return found

    def _row_op(self, module: nn.Module, x: torch.Tensor) -> Callable[[int | None], Pairs]:
        """A row-wise op's comparison: rows along the token axis (2 for per-head norms' (1, heads, T, d))."""
        axis = 2 if x.dim() == 4 else 1

        def compare(rows: int | None) -> Pairs:
            count = self.tree.num_tokens if rows is None else rows
            with torch.no_grad():
                together = module(x.narrow(axis, self.start, count))
                alone = [module(x.narrow(axis, self.start + j, 1)) for j in range(count)]
            return _row_pairs(together, alone, axis)

        return compare

    def _rotate(self, rows: slice | torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Query and key of ``rows`` rotated to ``positions`` by the model's own rotary embedding."""
        module, args = self.inputs.rotary
        hidden, _, *rest = args  # the hidden states set only the cos/sin dtype and device
        with torch.no_grad():
            cos, sin = module(hidden, positions[None].to(hidden.device), *rest)
            return self.inputs.apply_rotary(self.inputs.query[:, :, rows], self.inputs.key[:, :, rows], cos, sin)

    def _rotary(self, rows: int | None) -> Pairs:
        """The rotary embedding: rows' query and key rotated together against each rotated alone."""
        count = self.tree.num_tokens if rows is None else rows
        offsets = self.tree_positions if rows is None else torch.arange(count) + self.start
        token = torch.arange(count) + self.start
        together = torch.cat(self._rotate(token, offsets), dim=1)
        alone = [torch.cat(self._rotate(token[j : j + 1], offsets[j : j + 1]), dim=1) for j in range(count)]
        return _row_pairs(together, alone, 2)

    def _mask(self, layout: StepLayout) -> torch.Tensor:
        """The step's attention mask as the engine builds it (``masks.py``) for this layer's kind."""
        full = full_step_mask(layout, self.start, "cpu")
        window = getattr(self.inputs.attention, "sliding_window", None)
        return full if window is None else sliding_step_mask(full, layout, self.start, window)

    def _step(self, rows: int | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(query, key, value, mask, visible) of a k-row step (``rows``) or the tree step (None)."""
        if rows is None:
            return self.tree_query, self.tree_key, self.tree_value, self._mask(self.tree), self.tree_visible
        end = self.start + rows
        visible = torch.arange(end)[None, :] <= torch.arange(self.start, end)[:, None]
        query = self.query[:, :, self.start : end]
        return (
            query,
            self.key[:, :, :end],
            self.inputs.value[:, :, :end],
            self._mask(chain_layout(rows, self.dtype)),
            visible,
        )

    def _attention(self, rows: int | None) -> Pairs:
        """The model's attention (its configured implementation) in the step against each query alone."""
        attention = self.inputs.attention
        function = ALL_ATTENTION_FUNCTIONS[attention.config._attn_implementation]
        options: dict[str, Any] = {"dropout": 0.0, "scaling": attention.scaling}
        if hasattr(attention, "sliding_window"):
            options["sliding_window"] = attention.sliding_window
        if getattr(attention, "attn_logit_softcapping", None) is not None:
            options["softcap"] = attention.attn_logit_softcapping
        query, key, value, mask, visible = self._step(rows)
        with torch.no_grad():
            together = function(attention, query, key, value, mask, **options)[0]
            alone = []
            for j in range(query.shape[2]):
                keys = visible[j].nonzero().squeeze(1)
                alone.append(
                    function(attention, query[:, :, j : j + 1], key[:, :, keys], value[:, :, keys], None, **options)[0]
                )
        return _row_pairs(together, alone, 1)

    def _softmax(self, path: str, rows: int | None) -> Pairs:
        """The softmax of each row's scores (computed once) in the step's form against the row's alone."""
        query, key, _, mask, visible = self._step(rows)
        groups = query.shape[1] // key.shape[1]
        with torch.no_grad():
            scores = torch.matmul(query, key.repeat_interleave(groups, dim=1).transpose(2, 3))[0]
            scores = scores * self.inputs.attention.scaling  # (heads, rows, keys), as eager attention scales
            together = _softmax(path, scores, visible, mask[0])
            alone = [
                _softmax(path, scores[:, j : j + 1, visible[j]], visible[j : j + 1, visible[j]], None)[0]
                for j in range(visible.shape[0])
            ]
        return list(zip(together, alone, strict=True))


def _softmax(path: str, scores: torch.Tensor, visible: torch.Tensor, mask: torch.Tensor | None) -> list[torch.Tensor]:
    """Each row's probabilities over its visible keys, (heads, visible), as ``path``'s attention computes them.

    ``standard``: eager attention's form, the additive mask added in the model's dtype, a float32
    softmax over the whole row. ``batch_invariant``: the path's form, each row's visible scores
    compacted in key order and padded with -inf to a whole number of value blocks, a float32
    softmax (the path's own ``batch_invariant.compact_probabilities``).
    """
    if path == "standard":
        masked = scores if mask is None else scores + mask
        probs = torch.softmax(masked, dim=-1, dtype=torch.float32).to(scores.dtype)
        return [probs[:, j, visible[j]] for j in range(visible.shape[0])]
    counts = visible.sum(-1)
    probs = batch_invariant.compact_probabilities(scores, visible)
    return [probs[:, j, : int(counts[j])] for j in range(visible.shape[0])]


def _op_order(name: str) -> tuple[int, str]:
    """Ops in a layer's reading order: norms and projections as the layer runs them, then the head."""
    order = (
        "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.q_norm",
        "self_attn.k_norm", ROTARY, SOFTMAX, ATTENTION, "self_attn.o_proj", "post_attention_layernorm",
        "pre_feedforward_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "post_feedforward_layernorm",
        "final_norm", "lm_head",
    )  # fmt: skip
    return (order.index(name) if name in order else len(order), name)


def account_model(
    model: nn.Module,
    input_ids: torch.Tensor,
    *,
    layer: int,
    cache_tokens: int = CACHE_TOKENS,
    row_counts: Sequence[int] = ROW_COUNTS,
    tree: tuple[int, int, int] = TREE,
    check: bool = True,
) -> list[dict[str, Any]]:
    """The account of ``model``'s layer ``layer`` on both paths; leaves ``model`` on the batch-invariant path.

    Captures the layer's inputs from one forward of ``input_ids`` (1-D, at least
    :func:`tokens_needed` tokens) on the model as loaded, compares every op on the standard path,
    then enables the batch-invariant path (running its load-time check when ``check``) and compares
    the same ops on the same inputs.

    Returns:
        Records with :data:`COLUMNS`.

    Raises:
        ValueError: too few tokens, or no such layer.
        BatchInvarianceError: ``check`` and the device's kernels do not give the path its property.
    """
    needed = tokens_needed(cache_tokens, row_counts, tree)
    if input_ids.shape[0] < needed:
        raise ValueError(f"the account reads {needed} prompt tokens, got {input_ids.shape[0]}; give a longer prompt")
    inputs = capture_layer_inputs(model, input_ids[:needed], layer)
    found = StepAccount(inputs, cache_tokens, tree).records(PATHS[0], row_counts)
    batch_invariant.enable(model, check=check)
    # Rebuilt after the switch: the attention implementation is read from the layer's config.
    found += StepAccount(inputs, cache_tokens, tree).records(PATHS[1], row_counts)
    return found
