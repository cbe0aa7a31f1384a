"""A static-shape step executor: every step has one input length, on a static KV cache, compiled.

The eager executor (``single_device.py``) feeds each step exactly its tokens on a growing cache, so
the input length changes with the window's warm-up and the number of pooled candidates. Compiled
code wants one shape: here every step of a generation feeds ``StepShape.tokens`` inputs and asks for
``StepShape.logit_rows`` logit rows, whatever the step holds.

* Padding: the real step (window + branch, ``layout.py``) comes first; the rest are padding rows
  (token 0 at cur's position). A padding row sees only itself, so its values stay finite, and no
  real row sees it, so the real rows' logits are those of the unpadded step. Padding logit rows
  repeat row 0 and are never read.
* The cache is one full-length ``StaticLayer`` per layer of ``generate``'s cache
  (``kv_cache.engine_cache``; sliding layers too: like the eager executor's cache, every layer holds
  every entry and the masks hide what a local layer must not see), so a step's commit is the same
  for every layer. The committed length is
  ``position``, set before each forward; a commit moves the accepted entries in place
  (``kv_cache.move_accepted``) and leaves the rest to be masked and overwritten.
* The step forward is ``CompiledForwards.compiled_forward`` (``dynamic=False``): one compile per
  (shape, cache length); the prefill, whose length is the prompt's, runs eager.

The exactness contract is the executor seam's (``executor.py``): rows' logits are autoregressive
decoding's, padding is masked out and never accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import Cache

from lade_bench.decoding.core.branch import BRANCH_BUILDERS
from lade_bench.decoding.core.checks import LayerAttention, layer_attention_of
from lade_bench.decoding.core.compiled import CompiledForwards
from lade_bench.decoding.core.executor import ForwardRecord, StepInput
from lade_bench.decoding.core.kv_cache import engine_cache, entry_layers, move_accepted
from lade_bench.decoding.core.layout import LayoutCache, StepLayout
from lade_bench.decoding.core.masks import FULL_ATTENTION, SLIDING_ATTENTION
from lade_bench.decoding.core.params import DecodingConfigError
from lade_bench.decoding.core.single_device import SingleDeviceStep
from lade_bench.decoding.core.timing import Stopwatch, cache_argument_name, model_device, model_dtype


@dataclass(frozen=True)
class StepShape:
    """The fixed shape of every step of a generation.

    Attributes:
        tokens: input tokens of every step (the largest step, padded up to).
        logit_rows: logit rows of every step (the most any step reads).
    """

    tokens: int
    logit_rows: int


def lookahead_step_shape(ngram: int, window: int, guesses: int) -> StepShape:
    """The largest lookahead step of (N, W, G), warm-up included.

    With m levels the window has C = W + N - 1 - m columns (``window.py``), m*C tokens, and its
    logit rows are cur's plus the last level's C (cur's row is the last level's first when m = 1);
    the branch adds at most G*(N-1) tokens and rows (the flat layout; a trie feeds no more).
    """
    branch = guesses * (ngram - 1)
    windows = [(m, window + ngram - 1 - m) for m in range(1, ngram)]
    tokens = max(m * columns for m, columns in windows)
    rows = max(columns + (m > 1) for m, columns in windows)
    return StepShape(tokens + branch, rows + branch)


def full_static_cache(model: torch.nn.Module, length: int) -> Cache:
    """A static cache of ``length`` positions whose every layer keeps every entry (sliding ones too).

    The engine's cache (``kv_cache.engine_cache``: the layers ``generate``'s cache has) with static
    layers. transformers' ``StaticCache`` gives sliding layers a rolling buffer whose update branches
    on the cache's fill level, a Python decision on a tensor that recompiles the graph at every step;
    a full-length layer has no such branch, and the masks (``create_masks_for_generate``'s or the
    step's own) hide what a local layer must not see, so the attention is the same.
    """
    return engine_cache(model, static_length=length)


class StaticShapeExecutor:
    """A ``StepExecutor`` whose every step has the same input shape, on a static cache (compiled)."""

    def __init__(
        self,
        model: torch.nn.Module,
        verification: str,
        with_logits: bool,
        compiled: CompiledForwards,
        shape: StepShape,
        cache_length: int,
    ) -> None:
        """Steps of ``model`` padded to ``shape`` on a static cache of ``cache_length`` positions.

        Raises:
            DecodingConfigError: a cache shorter than one step.
        """
        if cache_length < shape.tokens + 1:
            raise DecodingConfigError(f"static cache length {cache_length} is shorter than one step ({shape.tokens})")
        self.cache = full_static_cache(model, cache_length)
        self.record = ForwardRecord()
        self._model = model
        self._shape = shape
        self._cache_length = cache_length
        self._device = model_device(model)
        self._dtype = model_dtype(model)
        self._cache_argument = cache_argument_name(model)
        self._attention = layer_attention_of(model)
        self._layouts = LayoutCache(self._dtype, self._device)
        self._branch_of = BRANCH_BUILDERS[verification]
        self._with_logits = with_logits
        self._step_forward = compiled.compiled_forward(model, "static_step")
        self._clock = Stopwatch(self._device)

    def prefill(self, ids: list[int], guesses: int) -> torch.Tensor:
        """The prompt and ``guesses`` window guesses in one causal forward (eager); only the prompt stays."""
        self._check_room(len(ids))
        self._set_committed(0)
        inputs = torch.tensor([ids], device=self._device)
        positions = torch.arange(len(ids), device=self._device)[None, :]
        logits = self._timed(
            self._model, len(ids), input_ids=inputs, position_ids=positions, logits_to_keep=guesses + 1
        )
        self._set_committed(len(ids) - guesses)
        return logits

    def step(self, inputs: StepInput) -> SingleDeviceStep:
        """One forward of the padded step: window and branch first, padding after."""
        self._check_room(inputs.position + self._shape.tokens)
        branch = self._branch_of(inputs.candidates, inputs.window_tokens[0])
        layout = self._layouts.get(inputs.levels, inputs.columns, branch)
        real = [*inputs.window_tokens, *branch.tokens]
        pad = self._shape.tokens - len(real)
        rows = self._shape.logit_rows - int(layout.logit_rows.shape[0])
        if pad < 0 or rows < 0:
            raise DecodingConfigError(f"a step of {len(real)} tokens does not fit the static step shape {self._shape}")
        tokens = torch.tensor([real + [0] * pad], device=self._device)
        offsets = torch.cat([layout.position_offsets, layout.position_offsets.new_zeros(pad)])
        keep = torch.cat([layout.logit_rows, layout.logit_rows.new_zeros(rows)])
        self._set_committed(inputs.position)
        logits = self._timed(
            self._step_forward,
            len(real),
            input_ids=tokens,
            attention_mask=self._masks(layout, inputs.position),
            position_ids=(offsets + inputs.position)[None, :],
            logits_to_keep=keep,
        )
        return SingleDeviceStep.from_logits(logits[: layout.logit_rows.shape[0]], layout, branch, self._with_logits)

    def commit(self, output: SingleDeviceStep, position: int, winner: int, matched: int) -> None:
        """Move the accepted tokens' entries right after cur's; the next step's length hides the rest."""
        move_accepted(self.cache, position, output.kept_offsets(winner, matched))
        self._set_committed(position + 1 + matched)

    def _timed(self, forward, real_tokens: int, **kwargs) -> torch.Tensor:
        # ``step_tokens`` counts the real tokens: what the step computes for the method, padding aside.
        self.record.step_tokens.append(real_tokens)
        self._clock.start()
        output = forward(**kwargs, **{self._cache_argument: self.cache}, use_cache=True)
        self._clock.stop()
        self.record.forward_time_s = self._clock.total
        return output.logits[0]

    def _set_committed(self, length: int) -> None:
        # Every layer writes its next inputs at its cumulative length: set it to the accepted count.
        for layer in entry_layers(self.cache):
            layer.cumulative_length.fill_(length)  # every entry layer is a StaticLayer

    def _check_room(self, needed: int) -> None:
        if needed > self._cache_length:
            raise DecodingConfigError(
                f"the static cache holds {self._cache_length} positions but this generation needs {needed}; "
                "the cache length is sized from the prompt, max_new_tokens and the step (a bug if reached)"
            )

    def _masks(self, layout: StepLayout, position: int) -> torch.Tensor | dict[str, torch.Tensor]:
        """The padded step's (1, 1, tokens, cache length) mask, one per layer type on hybrids."""
        full = padded_step_mask(layout, position, self._shape.tokens, self._cache_length, None)
        window = self._attention.sliding_window
        if window is None:
            return full
        sliding = padded_step_mask(layout, position, self._shape.tokens, self._cache_length, window)
        return _by_layer_type(self._attention, full, sliding)


def _by_layer_type(attention: LayerAttention, full: torch.Tensor, sliding: torch.Tensor):
    if attention.mask_keys is None:
        return sliding
    by_type = {FULL_ATTENTION: full, SLIDING_ATTENTION: sliding}
    return {key: by_type[key] for key in attention.mask_keys}


def padded_step_mask(
    layout: StepLayout, position: int, tokens: int, cache_length: int, window: int | None
) -> torch.Tensor:
    """(1, 1, tokens, cache_length) additive mask of a step padded to ``tokens`` inputs.

    Real row i sees the committed cache (``position`` entries; within ``window`` positions on a
    sliding layer, by ``StepLayout.within_window``) and the step block's columns it sees in
    ``layout.mask_block``; padding row i sees only itself; every other column (padding, stale
    entries past the step) is hidden.
    """
    dtype = layout.mask_block.dtype
    device = layout.mask_block.device
    q = layout.num_tokens
    hidden = torch.finfo(dtype).min
    mask = torch.full((1, 1, tokens, cache_length), hidden, dtype=dtype, device=device)
    mask[0, 0, :q, :position] = 0
    mask[0, 0, :q, position : position + q] = layout.mask_block
    if window is not None:
        too_far = ~layout.within_window(position, window)
        mask[0, 0, :q, : position + q].masked_fill_(too_far, hidden)
    padding = torch.arange(q, tokens, device=device)
    mask[0, 0, padding, position + padding] = 0
    return mask
