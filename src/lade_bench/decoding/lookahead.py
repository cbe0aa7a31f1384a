"""Lookahead decoding: Jacobi window + n-gram pool + verification in one forward pass per step."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from transformers import DynamicCache

from lade_bench.decoding.branch import BRANCH_BUILDERS
from lade_bench.decoding.checks import check_custom_mask_support, eos_set, layer_attention_of, prompt_ids_as_list
from lade_bench.decoding.kv_cache import commit_accepted
from lade_bench.decoding.layout import LayoutCache
from lade_bench.decoding.masks import StepMasks
from lade_bench.decoding.params import (
    DecodeResult,
    LookaheadParams,
    SamplingParams,
    truncate_at_stop,
    validate_max_new_tokens,
)
from lade_bench.decoding.pool import NGramPool
from lade_bench.decoding.position_limits import check_position_limits, lookahead_reach
from lade_bench.decoding.sampling import build_warpers, warped_probabilities
from lade_bench.decoding.timing import (
    Stopwatch,
    cache_argument_name,
    device_synchronizer,
    model_device,
    model_dtype,
)
from lade_bench.decoding.verify import verify_greedy, verify_sampling
from lade_bench.decoding.window import LookaheadWindow, initial_guesses

if TYPE_CHECKING:
    from lade_bench.decoding.parallel import LookaheadGroup


@torch.no_grad()
def lookahead_generate(
    model: torch.nn.Module,
    input_ids: Sequence[int] | torch.Tensor,
    params: LookaheadParams,
    max_new_tokens: int,
    *,
    sampling: SamplingParams | None = None,
    eos_token_id: int | Iterable[int] | None = None,
    seed: int = 0,
    parallel: LookaheadGroup | None = None,
) -> DecodeResult:
    """Generate up to ``max_new_tokens`` tokens after ``input_ids`` with lookahead decoding.

    Greedy (the default) emits exactly the tokens of ``model.generate(do_sample=False)``; with
    ``sampling.do_sample`` the output follows the same distribution as autoregressive sampling. One
    forward pass per step carries the window and up to G pooled candidates under a custom 4D mask.

    Args:
        model: a decoder-only transformers model using eager or SDPA attention, batch size 1; global,
            sliding-window or hybrid (Gemma 2/3) attention layers.
        input_ids: the prompt, a list of ids or a 1 x L / L tensor.
        params: N, W, G and prompt-as-reference.
        max_new_tokens: most tokens to generate (>= 1).
        sampling: greedy when None or ``do_sample=False``.
        eos_token_id: stop after emitting any of these ids (included in the output).
        seed: seeds the window initialisation and every sampling draw.
        parallel: lookahead parallelism: every rank of this group calls with the same arguments and
            its own full model replica; each step's window columns and candidates are split over
            the ranks (``lade_bench.decoding.parallel``). None or one rank: a single device.

    Returns:
        DecodeResult; ``steps`` counts every forward: the prefill (which also carries the window's
        first level) and each lookahead step.
    """
    sampling = sampling or SamplingParams()
    validate_max_new_tokens(max_new_tokens)
    prompt = prompt_ids_as_list(input_ids)
    check_custom_mask_support(model)
    check_position_limits(model, len(prompt), max_new_tokens, lookahead_reach(params))
    stop_ids = eos_set(eos_token_id)
    if parallel is not None and parallel.world_size > 1:
        from lade_bench.decoding.parallel import ParallelLookaheadRun

        return ParallelLookaheadRun(model, prompt, params, max_new_tokens, sampling, stop_ids, seed, parallel).run()
    return _LookaheadRun(model, prompt, params, max_new_tokens, sampling, stop_ids, seed).run()


@dataclass
class StepOutput:
    """What one lookahead step's forward pass(es) yield, in the order verification reads it.

    Attributes:
        predictions: argmax of every row; row 0 is cur's (the first token greedy decoding emits).
        last_level: argmax of the last window level's C rows, in column order.
        candidate_rows: for each candidate, the rows (indices into ``predictions``) of its N-1 tokens.
        logits: the rows' logits, aligned with ``predictions`` (read by sampling verification only).
        shape: what committing the step's accepted entries needs (the executor's own layout).
    """

    predictions: list[int]
    last_level: list[int]
    candidate_rows: list[list[int]]
    logits: torch.Tensor | None
    shape: Any


class _LookaheadRun:
    """State of one lookahead generation (kept out of module scope: one object per call).

    The step's forward and the commit of its accepted cache entries are the overridable pieces
    (``_prefill_logits``, ``_step``, ``_commit``): lookahead parallelism replaces only those.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        prompt: list[int],
        params: LookaheadParams,
        max_new_tokens: int,
        sampling: SamplingParams,
        stop_ids: frozenset[int],
        seed: int,
    ) -> None:
        self.model = model
        self.prompt = prompt
        self.params = params
        self.max_new_tokens = max_new_tokens
        self.sampling = sampling
        self.stop_ids = stop_ids
        self.device = model_device(model)
        self.generator = torch.Generator().manual_seed(seed)
        self.warpers = build_warpers(sampling) if sampling.do_sample else None
        self.layouts = LayoutCache(model_dtype(model), self.device)
        self.branch_of = BRANCH_BUILDERS[params.verification]
        self.masks = StepMasks(layer_attention_of(model), self.device)
        self.forward_clock = Stopwatch(self.device)
        # No config: every layer keeps every entry (no sliding-window trimming), so all layers have one
        # length and a step's commit is the same for full and sliding layers (see masks.py).
        self.cache = DynamicCache()
        self.cache_argument = cache_argument_name(model)
        self.tokens: list[int] = []
        # prompt + tokens, kept incrementally because the pool reads n-grams across the boundary.
        self.sequence: list[int] = list(prompt)
        self.accept_lengths: list[int] = []
        self.step_tokens: list[int] = []
        self.steps_with_candidates = 0
        self.steps_with_hit = 0

    def run(self) -> DecodeResult:
        sync = device_synchronizer(self.device)
        sync()
        started = time.perf_counter()
        window = LookaheadWindow(
            self.params.ngram,
            self.params.window,
            initial_guesses(self.prompt, self.params.window + self.params.ngram - 3, self.generator),
        )
        finished = self._prefill(window)
        if not finished:
            self._decode(window)
        sync()
        wall = time.perf_counter() - started
        decode_steps = max(len(self.accept_lengths) - 1, 1)
        return DecodeResult(
            tokens=self.tokens,
            steps=len(self.accept_lengths),
            accept_lengths=self.accept_lengths,
            wall_time_s=wall,
            forward_time_s=self.forward_clock.total,
            method="lookahead_sampling" if self.sampling.do_sample else "lookahead",
            stats={
                "pool_hit_rate": self.steps_with_hit / decode_steps,
                "steps_with_candidates": float(self.steps_with_candidates),
                "steps_with_hit": float(self.steps_with_hit),
                # Input tokens of the lookahead steps (prefill excluded): what the step cost grows with.
                "decode_step_tokens": float(sum(self.step_tokens[1:])),
            },
            step_tokens=self.step_tokens,
        )

    def _forward(self, ids: list[int], **kwargs) -> torch.Tensor:
        """One model forward on top of the cache; returns the kept logits, shape (rows, V)."""
        input_tensor = torch.tensor([ids], device=self.device)
        self.step_tokens.append(len(ids))
        self.forward_clock.start()
        output = self.model(input_ids=input_tensor, **{self.cache_argument: self.cache}, use_cache=True, **kwargs)
        self.forward_clock.stop()
        return output.logits[0]

    def _prefill(self, window: LookaheadWindow) -> bool:
        """Prompt and the window's first level in one causal forward (as the official code does).

        The guesses sit right after the prompt, the first one at cur's position, so their argmaxes
        are the window's next level: the first warm-up step rides along with the prefill instead of
        costing a forward of its own. Only the prompt's entries stay in the cache; the guesses'
        are cropped, so the committed cache holds exactly the accepted tokens as after a plain
        prefill. The model builds its own (causal, and for local layers sliding-window) masks here:
        the prompt rows never see the guesses, so the prompt's cache entries are the plain prefill's.
        """
        guesses = list(window.levels[0])
        logits = self._prefill_logits(self.prompt + guesses, len(guesses))
        if self.warpers is None:
            first = int(logits[0].argmax())
        else:
            probabilities = warped_probabilities(logits[0], self.warpers)
            first = int(torch.multinomial(probabilities.cpu(), 1, generator=self.generator))
        # Row 0 stands for cur's column; update() drops it, like cur's prediction in a normal step.
        window.update([first, *logits[1:].argmax(dim=-1).tolist()])
        return self._emit([first])

    def _prefill_logits(self, ids: list[int], guesses: int) -> torch.Tensor:
        """Logits of the prefill's last ``guesses + 1`` rows; the cache keeps only the prompt's entries."""
        logits = self._forward(ids, logits_to_keep=guesses + 1)
        if guesses:
            self.cache.crop(-guesses)
        return logits

    def _decode(self, window: LookaheadWindow) -> None:
        n, g = self.params.ngram, self.params.guesses
        pool = NGramPool(length=n - 1, cap=g)
        if self.params.prompt_as_reference:
            pool.add_ngrams_of(self.sequence)
        while True:
            cur = self.tokens[-1]
            position = len(self.sequence) - 1
            candidates = pool.candidates(cur)
            step = self._step(cur, position, window, candidates)
            if self.warpers is None:
                accepted, winner, matched = verify_greedy(step.predictions, candidates, step.candidate_rows)
            else:
                accepted, winner, matched = verify_sampling(
                    functools.partial(self._probabilities, step.logits),
                    candidates,
                    step.candidate_rows,
                    self.generator,
                )
            self.steps_with_candidates += bool(candidates)
            self.steps_with_hit += matched > 0

            for ngram in window.ngrams(cur, step.last_level):
                pool.add(ngram[0], ngram[1:])
            window.update(step.last_level)
            self._commit(step, position, winner, matched)

            emitted_from = len(self.sequence)
            finished = self._emit(accepted)
            if self.params.prompt_as_reference:
                pool.add_ngrams_of(self.sequence, first_end=emitted_from)
            if finished:
                return

    def _step(self, cur: int, position: int, window: LookaheadWindow, candidates: list[tuple[int, ...]]) -> StepOutput:
        """One forward pass of the whole step: window and the verification branch under one mask."""
        branch = self.branch_of(candidates)
        layout = self.layouts.get(window.num_levels, window.num_columns, branch.paths)
        step_ids = window.input_tokens(cur)
        step_ids.extend(branch.tokens)
        logits = self._forward(
            step_ids,
            attention_mask=self.masks.build(layout, position),
            position_ids=(layout.position_offsets + position)[None, :],
            logits_to_keep=layout.logit_rows,
        )
        predictions = logits.argmax(dim=-1).tolist()
        last_level = [predictions[r] for r in layout.last_level_rows]
        return StepOutput(predictions, last_level, layout.candidate_rows, logits, (layout, branch))

    def _commit(self, step: StepOutput, position: int, winner: int, matched: int) -> None:
        """Keep cur's and the ``matched`` accepted tokens of candidate ``winner``'s cache entries."""
        layout, branch = step.shape
        # The accepted tokens' nodes (winner is -1 when nothing matched, possibly with no branch).
        accepted_nodes = branch.paths[winner][:matched] if matched else ()
        kept = [layout.candidate_offset + node for node in accepted_nodes]
        commit_accepted(self.cache, position, layout.num_tokens, kept)

    def _probabilities(self, logits: torch.Tensor, row: int) -> torch.Tensor:
        """Warped target distribution of logit row ``row`` (a fresh tensor: verification edits it)."""
        return warped_probabilities(logits[row], self.warpers)

    def _emit(self, accepted: list[int]) -> bool:
        """Append this step's tokens, cut at EOS and the budget; True when generation is over."""
        kept, finished = truncate_at_stop(accepted, self.max_new_tokens - len(self.tokens), self.stop_ids)
        self.tokens.extend(kept)
        self.sequence.extend(kept)
        self.accept_lengths.append(len(kept))
        return finished
