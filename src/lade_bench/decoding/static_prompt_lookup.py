"""Prompt lookup decoding in the compiled mode: transformers' candidate rule on a static-shape step.

transformers' prompt lookup runs inside assisted generation, which cannot use a static cache (its
candidate lengths change every step), so the compiled mode runs the same method on the static-shape
executor (``static_step.py``): each step feeds cur and one candidate, padded to ``num_tokens + 1``
inputs, and keeps the longest prefix the model agrees with. The candidate is the one transformers'
``PromptLookupCandidateGenerator`` picks (:func:`prompt_lookup_candidate`), so greedy output is AR's
and the step counts follow the eager arm's; sampling verifies with the lookahead arm's rule, which
keeps the target distribution.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from lade_bench.decoding.compiled import CompiledForwards
from lade_bench.decoding.emission import Emitted, TokenChoice
from lade_bench.decoding.executor import StepInput
from lade_bench.decoding.params import DecodeResult, SamplingParams
from lade_bench.decoding.static_step import StaticShapeExecutor, StepShape
from lade_bench.decoding.timing import device_synchronizer, model_device


def prompt_lookup_candidate(
    sequence: Sequence[int], num_tokens: int, max_ngram_size: int, stop_ids: frozenset[int], max_length: int
) -> list[int]:
    """The tokens transformers' prompt lookup proposes after ``sequence`` (empty: none).

    The longest suffix n-gram (``max_ngram_size`` down to 1) that occurs earlier in the sequence, at
    its first occurrence, proposes the up to ``num_tokens`` tokens that followed it, cut before the
    first stop id; none when the sequence is one short of ``max_length``.
    """
    length = len(sequence)
    if length + 1 >= max_length:
        return []
    for size in range(min(max_ngram_size, length - 1), 0, -1):
        suffix = list(sequence[-size:])
        for start in range(length - size + 1):
            if list(sequence[start : start + size]) != suffix:
                continue
            begin = start + size
            end = min(begin + num_tokens, length, max_length)
            if begin >= end:
                continue
            chosen = list(sequence[begin:end])
            for index, token in enumerate(chosen):
                if token in stop_ids:
                    chosen = chosen[:index]
                    break
            return chosen
    return []


def static_prompt_lookup_generate(
    model: torch.nn.Module,
    prompt: list[int],
    max_new_tokens: int,
    compiled: CompiledForwards,
    *,
    num_tokens: int,
    max_ngram_size: int,
    sampling: SamplingParams,
    stop_ids: frozenset[int],
    seed: int,
) -> DecodeResult:
    """Prompt lookup on the compiled static-shape step; its compile untimed (``CompiledForwards.run``).

    ``prompt_lookup_generate`` (the only caller) has run the static-shape and model checks.
    """
    shape = StepShape(tokens=num_tokens + 1, logit_rows=num_tokens + 1)
    cache_length = compiled.cache_length(len(prompt) + max_new_tokens + shape.tokens)
    device = model_device(model)

    def generation() -> DecodeResult:
        executor = StaticShapeExecutor(model, "flat", sampling.do_sample, compiled, shape, cache_length)
        return _PromptLookupLoop(
            executor, prompt, max_new_tokens, num_tokens, max_ngram_size, sampling, stop_ids, seed
        ).run(device)

    return compiled.run((id(model), "static_step", shape, cache_length), device, generation)


class _PromptLookupLoop:
    """State of one generation: the candidate rule's settings, the token choice, the output so far."""

    def __init__(
        self,
        executor: StaticShapeExecutor,
        prompt: list[int],
        max_new_tokens: int,
        num_tokens: int,
        max_ngram_size: int,
        sampling: SamplingParams,
        stop_ids: frozenset[int],
        seed: int,
    ) -> None:
        self.executor = executor
        self.prompt = prompt
        self.max_length = len(prompt) + max_new_tokens
        self.num_tokens = num_tokens
        self.max_ngram_size = max_ngram_size
        self.stop_ids = stop_ids
        self.choice = TokenChoice(sampling, seed)
        self.out = Emitted(prompt, max_new_tokens, stop_ids)

    def run(self, device: torch.device) -> DecodeResult:
        sync = device_synchronizer(device)
        sync()
        started = time.perf_counter()
        logits = self.executor.prefill(self.prompt, 0)
        finished = self.out.emit([self.choice.first(logits[-1])])
        sequence = self.out.sequence
        while not finished:
            position = len(sequence) - 1
            candidate = prompt_lookup_candidate(
                sequence, self.num_tokens, self.max_ngram_size, self.stop_ids, self.max_length
            )
            candidates = [tuple(candidate)] if candidate else []
            step = self.executor.step(StepInput(position, [self.out.tokens[-1]], 1, 1, candidates))
            accepted, winner, matched = self.choice.verify(step, candidates)
            self.executor.commit(step, position, winner, matched)
            finished = self.out.emit(accepted)
        sync()
        return DecodeResult(
            tokens=self.out.tokens,
            steps=len(self.out.accept_lengths),
            accept_lengths=self.out.accept_lengths,
            wall_time_s=time.perf_counter() - started,
            forward_time_s=self.executor.record.forward_time_s,
            method="prompt_lookup_sampling" if self.choice.samples else "prompt_lookup",
            step_tokens=self.executor.record.step_tokens,
        )
