"""Jacobi decoding without an n-gram pool: the paper's motivating ablation.

Each step feeds cur plus a block of guesses under a plain causal mask, accepts the guesses that equal
the greedy prediction before them (plus one more token), and uses the predictions for the rest of
the block as the next guesses (a Jacobi fixed-point iteration).

The block is plain causal, so the model builds its own masks (sliding-window ones for local layers
included); the cache is the engine's (``kv_cache.engine_cache``: generate's layers, each keeping every
entry), so cropping the rejected guesses is exact for full and sliding layers alike.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import torch

from lade_bench.decoding.core.checks import eos_set, prompt_ids_as_list
from lade_bench.decoding.core.forward import following_positions
from lade_bench.decoding.core.kv_cache import engine_cache
from lade_bench.decoding.core.params import (
    JACOBI_BLOCK_SIZE,
    DecodeResult,
    require_int,
    truncate_at_stop,
    validate_max_new_tokens,
)
from lade_bench.decoding.core.position_limits import check_position_limits, jacobi_reach
from lade_bench.decoding.core.timing import Stopwatch, cache_argument_name, device_synchronizer, model_device
from lade_bench.decoding.lookahead.window import initial_guesses
from lade_bench.decoding.model_checks.support import check_model_support


@torch.no_grad()
def jacobi_generate(
    model: torch.nn.Module,
    input_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    *,
    block_size: int = JACOBI_BLOCK_SIZE,
    eos_token_id: int | Iterable[int] | None = None,
    seed: int = 0,
) -> DecodeResult:
    """Greedy Jacobi decoding with ``block_size`` guesses per step; output equals AR greedy.

    Args:
        block_size: guessed tokens fed after cur each step (>= 1).
        seed: seeds the initial guesses (drawn from the prompt) and the refills.
    """
    require_int("jacobi block_size", block_size, minimum=1)
    validate_max_new_tokens(max_new_tokens)
    prompt = prompt_ids_as_list(input_ids)
    check_position_limits(model, len(prompt), max_new_tokens, jacobi_reach(block_size))
    check_model_support(model, custom_mask=True)
    stop_ids = eos_set(eos_token_id)
    device = model_device(model)
    generator = torch.Generator().manual_seed(seed)
    cache_key = cache_argument_name(model)
    cache = engine_cache(model)
    forward_clock = Stopwatch(device)
    sync = device_synchronizer(device)
    step_tokens: list[int] = []

    def forward(ids: list[int]) -> list[int]:
        step_tokens.append(len(ids))
        forward_clock.start()
        # Explicit positions, as generate passes them (see forward.CachedForward).
        positions = following_positions(cache.get_seq_length(), len(ids), device)
        output = model(
            input_ids=torch.tensor([ids], device=device), position_ids=positions, **{cache_key: cache}, use_cache=True
        )
        forward_clock.stop()
        return output.logits[0].argmax(dim=-1).tolist()

    tokens: list[int] = []
    accept_lengths: list[int] = []

    def emit(accepted: list[int]) -> bool:
        kept, finished = truncate_at_stop(accepted, max_new_tokens - len(tokens), stop_ids)
        tokens.extend(kept)
        accept_lengths.append(len(kept))
        return finished

    sync()
    started = time.perf_counter()
    finished = emit([forward(prompt)[-1]])
    guesses = initial_guesses(prompt, block_size, generator)
    while not finished:
        predictions = forward([tokens[-1], *guesses])
        matched = 0
        while matched < block_size and guesses[matched] == predictions[matched]:
            matched += 1
        accepted = predictions[: matched + 1]
        # The cache holds cur plus all guesses; only cur and the matched guesses are real tokens.
        cache.crop(-(block_size - matched))
        # Predictions past the accepted ones are the Jacobi update of the remaining guesses.
        guesses = predictions[matched + 1 :]
        guesses += initial_guesses(prompt, block_size - len(guesses), generator)
        finished = emit(accepted)
    sync()
    return DecodeResult(
        tokens=tokens,
        steps=len(accept_lengths),
        accept_lengths=accept_lengths,
        wall_time_s=time.perf_counter() - started,
        forward_time_s=forward_clock.total,
        method="jacobi",
        step_tokens=step_tokens,
    )
