"""Lookahead decoding: Jacobi window + n-gram pool + verification in one forward pass per step.

This module is the decoding loop; the forwards and the KV cache are an executor's
(``executor.py``), chosen here from the call's arguments.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from lade_bench.decoding.core.checks import eos_set, prompt_ids_as_list
from lade_bench.decoding.core.compiled import CompiledForwards, check_static_shape_support
from lade_bench.decoding.core.emission import Emitted, TokenChoice
from lade_bench.decoding.core.executor import StepExecutor, StepInput
from lade_bench.decoding.core.params import (
    DecodeResult,
    LookaheadParams,
    SamplingParams,
    validate_max_new_tokens,
)
from lade_bench.decoding.core.position_limits import check_position_limits, lookahead_reach
from lade_bench.decoding.core.single_device import SingleDeviceExecutor
from lade_bench.decoding.core.static_step import StaticShapeExecutor, lookahead_step_shape
from lade_bench.decoding.core.timing import device_synchronizer, model_device
from lade_bench.decoding.lookahead.parallel import LookaheadGroup, ParallelExecutor
from lade_bench.decoding.lookahead.pool import NGramPool
from lade_bench.decoding.lookahead.window import LookaheadWindow, initial_guesses
from lade_bench.decoding.model_checks.support import check_model_support


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
    compiled: CompiledForwards | None = None,
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
            the ranks (``lade_bench.decoding.lookahead.parallel``). None or one rank: a single device.
        compiled: the compiled mode: every step padded to one shape on a static cache, compiled
            (``static_step.py``), its compile untimed; None: eager. Single device, sdpa or eager
            attention.

    Returns:
        DecodeResult; ``steps`` counts every forward: the prefill (which also carries the window's
        first level) and each lookahead step.
    """
    sampling = sampling or SamplingParams()
    validate_max_new_tokens(max_new_tokens)
    prompt = prompt_ids_as_list(input_ids)
    check_position_limits(model, len(prompt), max_new_tokens, lookahead_reach(params))
    if compiled is not None:
        check_static_shape_support(model, parallel)
    # Last: after every refusal that needs no forward, since the model probe runs a few.
    check_model_support(model, custom_mask=True)
    stop_ids = eos_set(eos_token_id)
    device = model_device(model)
    if compiled is None:
        executor = choose_executor(model, params, sampling, parallel)
        return _DecodingLoop(executor, prompt, params, max_new_tokens, sampling, stop_ids, seed, device).run()
    shape = lookahead_step_shape(params.ngram, params.window, params.guesses)
    cache_length = compiled.cache_length(len(prompt) + max_new_tokens + shape.tokens)

    def generation() -> DecodeResult:
        executor = StaticShapeExecutor(model, params.verification, sampling.do_sample, compiled, shape, cache_length)
        return _DecodingLoop(executor, prompt, params, max_new_tokens, sampling, stop_ids, seed, device).run()

    return compiled.run((id(model), "static_step", shape, cache_length), device, generation)


def choose_executor(
    model: torch.nn.Module,
    params: LookaheadParams,
    sampling: SamplingParams,
    parallel: LookaheadGroup | None,
) -> StepExecutor[Any]:
    """The executor ``lookahead_generate`` runs on, from its arguments.

    Lookahead-parallel over a group of more than one rank, otherwise single-device; either returns
    logits only when sampling verification reads them.
    """
    if parallel is not None and parallel.world_size > 1:
        return ParallelExecutor(model, params.ngram, params.verification, sampling.do_sample, parallel)
    return SingleDeviceExecutor(model, params.verification, sampling.do_sample)


class _DecodingLoop:
    """State of one lookahead generation (kept out of module scope: one object per call).

    The window, the pool, verification and stopping live here, whatever the executor; the
    executor runs the forwards and keeps the cache (``executor.py``).
    """

    def __init__(
        self,
        executor: StepExecutor[Any],
        prompt: list[int],
        params: LookaheadParams,
        max_new_tokens: int,
        sampling: SamplingParams,
        stop_ids: frozenset[int],
        seed: int,
        device: torch.device,
    ) -> None:
        self.executor = executor
        self.prompt = prompt
        self.params = params
        self.sampling = sampling
        self.device = device
        self.choice = TokenChoice(sampling, seed)
        self.out = Emitted(prompt, max_new_tokens, stop_ids)
        self.steps_with_candidates = 0
        self.steps_with_hit = 0

    def run(self) -> DecodeResult:
        sync = device_synchronizer(self.device)
        sync()
        started = time.perf_counter()
        window = LookaheadWindow(
            self.params.ngram,
            self.params.window,
            initial_guesses(self.prompt, self.params.window + self.params.ngram - 3, self.choice.generator),
        )
        finished = self._prefill(window)
        if not finished:
            self._decode(window)
        sync()
        wall = time.perf_counter() - started
        decode_steps = max(len(self.out.accept_lengths) - 1, 1)
        return DecodeResult(
            tokens=self.out.tokens,
            steps=len(self.out.accept_lengths),
            accept_lengths=self.out.accept_lengths,
            wall_time_s=wall,
            forward_time_s=self.executor.record.forward_time_s,
            method="lookahead_sampling" if self.sampling.do_sample else "lookahead",
            stats={
                "pool_hit_rate": self.steps_with_hit / decode_steps,
                "steps_with_candidates": float(self.steps_with_candidates),
                "steps_with_hit": float(self.steps_with_hit),
                # Input tokens of the lookahead steps (prefill excluded): what the step cost grows with.
                "decode_step_tokens": float(sum(self.executor.record.step_tokens[1:])),
            },
            step_tokens=self.executor.record.step_tokens,
        )

    def _prefill(self, window: LookaheadWindow) -> bool:
        """Prompt and the window's first level in one causal forward (as the official code does).

        The guesses sit right after the prompt, the first one at cur's position, so their argmaxes
        are the window's next level: the first warm-up step rides along with the prefill instead of
        costing a forward of its own. Only the prompt's entries stay in the cache; the guesses'
        are cropped, so the committed cache holds exactly the accepted tokens as after a plain
        prefill (``StepExecutor.prefill``).
        """
        guesses = list(window.levels[0])
        logits = self.executor.prefill(self.prompt + guesses, len(guesses))
        first = self.choice.first(logits[0])
        # Row 0 stands for cur's column; update() drops it, like cur's prediction in a normal step.
        window.update([first, *logits[1:].argmax(dim=-1).tolist()])
        return self.out.emit([first])

    def _decode(self, window: LookaheadWindow) -> None:
        n, g = self.params.ngram, self.params.guesses
        pool = NGramPool(length=n - 1, cap=g)
        sequence = self.out.sequence
        if self.params.prompt_as_reference:
            pool.add_ngrams_of(sequence)
        while True:
            cur = self.out.tokens[-1]
            position = len(sequence) - 1
            candidates = pool.candidates(cur)
            step = self.executor.step(
                StepInput(position, window.input_tokens(cur), window.num_levels, window.num_columns, candidates)
            )
            accepted, winner, matched = self.choice.verify(step, candidates)
            self.steps_with_candidates += bool(candidates)
            self.steps_with_hit += matched > 0

            for ngram in window.ngrams(cur, step.last_level):
                pool.add(ngram[0], ngram[1:])
            window.update(step.last_level)
            self.executor.commit(step, position, winner, matched)

            emitted_from = len(sequence)
            finished = self.out.emit(accepted)
            if self.params.prompt_as_reference:
                pool.add_ngrams_of(sequence, first_end=emitted_from)
            if finished:
                return
