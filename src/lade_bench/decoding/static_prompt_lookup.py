"""Prompt lookup decoding in the compiled mode: transformers' candidate rule on a static-shape step.

transformers' prompt lookup runs inside assisted generation, which cannot use a static cache (its
candidate lengths change every step), so the compiled mode runs the same method on the static-shape
executor (``static_step.py``): each step feeds cur and one candidate, padded to ``num_tokens + 1``
inputs, and keeps the longest prefix the model agrees with. The candidate is the one transformers'
``PromptLookupCandidateGenerator`` picks (``prompt_lookup.PromptLookupDrafter``, the eager arm's
drafter too), so greedy output is AR's and the step counts are the eager arm's; greedy verification
is the draft-tree primitive's (``verify.verify_greedy`` runs ``tree.verify_tree_greedy`` on the
chain), and sampling verifies with the lookahead arm's rule, which keeps the target distribution.
"""

from __future__ import annotations

import time

import torch

from lade_bench.decoding.compiled import CompiledForwards
from lade_bench.decoding.emission import Emitted, TokenChoice
from lade_bench.decoding.executor import StepInput
from lade_bench.decoding.params import DecodeResult, SamplingParams
from lade_bench.decoding.prompt_lookup import PromptLookupDrafter
from lade_bench.decoding.static_step import StaticShapeExecutor, StepShape
from lade_bench.decoding.timing import device_synchronizer, model_device


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
        self.drafter = PromptLookupDrafter(num_tokens, max_ngram_size, stop_ids, len(prompt) + max_new_tokens)
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
            tree = self.drafter.propose(sequence)
            candidates = [tree.tokens[1:]] if tree.size > 1 else []
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
