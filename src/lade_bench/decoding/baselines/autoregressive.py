"""The autoregressive baseline: greedy/sampling through ``model.generate``, eager or compiled.

Prompt lookup decoding, once here, is a drafter (``drafters/prompt_lookup.py``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from transformers import CompileConfig, GenerationConfig

from lade_bench.decoding.core.checks import eos_set, prompt_ids_as_list
from lade_bench.decoding.core.compiled import CompiledForwards
from lade_bench.decoding.core.params import (
    DecodeResult,
    SamplingParams,
    validate_max_new_tokens,
)
from lade_bench.decoding.core.static_step import full_static_cache
from lade_bench.decoding.core.timing import Stopwatch, cache_argument_name, device_synchronizer, model_device


@torch.no_grad()
def autoregressive_generate(
    model: torch.nn.Module,
    input_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    *,
    sampling: SamplingParams | None = None,
    eos_token_id: int | Iterable[int] | None = None,
    seed: int = 0,
    compiled: CompiledForwards | None = None,
) -> DecodeResult:
    """The paper's "HuggingFace greedy search" baseline (or plain sampling): ``model.generate``.

    ``seed`` seeds torch's global generator right before the call, which is what ``generate``
    samples from. ``compiled``: the compiled mode (transformers' recipe for fast generation: a
    static KV cache and the decoding forward compiled, CUDA graphs on a GPU); None: eager.
    """
    if compiled is not None:
        return compiled_autoregressive_generate(
            model, input_ids, max_new_tokens, compiled, sampling=sampling, eos_token_id=eos_token_id, seed=seed
        )
    return _generate(model, input_ids, max_new_tokens, sampling, eos_token_id, seed, method="ar")


def compiled_autoregressive_generate(
    model: torch.nn.Module,
    input_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    compiled: CompiledForwards,
    *,
    sampling: SamplingParams | None = None,
    eos_token_id: int | Iterable[int] | None = None,
    seed: int = 0,
) -> DecodeResult:
    """AR through ``generate`` on a static cache with the decoding forward compiled (compile untimed).

    The cache length is the prompt plus the budget rounded up (``CompiledForwards.cache_length``),
    so prompts of similar length share one compiled graph; every layer keeps every entry
    (``static_step.full_static_cache``: sliding layers too). ``generate`` compiles its own forward
    (``compile_config``, on every device); its prefill runs eager.

    Counting: AR runs exactly one forward per new token (the prefill yields the first), which is
    what the eager arm's forward hook counts too; here the hook stays off so nothing runs Python
    inside the compiled region.
    """
    validate_max_new_tokens(max_new_tokens)
    prompt = prompt_ids_as_list(input_ids)
    device = model_device(model)
    cache_length = compiled.cache_length(len(prompt) + max_new_tokens)
    compile_config = CompileConfig(backend=compiled.backend, fullgraph=False, dynamic=False)
    # The eager backend takes no mode (CompileConfig's default, reduce-overhead, would reach it and warn).
    compile_config.mode = compiled.mode_on(device) if compiled.backend == "inductor" else None  # type: ignore[assignment]
    # transformers compiles on GPU-like devices only unless told that every device is meant.
    compile_config._compile_all_devices = True  # type: ignore[assignment]

    def generation() -> DecodeResult:
        cache = full_static_cache(model, cache_length)
        return _generate(
            model,
            prompt,
            max_new_tokens,
            sampling,
            eos_token_id,
            seed,
            method="ar",
            extra={"compile_config": compile_config},
            generate_kwargs={cache_argument_name(model): cache},
            count_forwards=False,
        )

    return compiled.run((id(model), "ar", cache_length), device, generation)


def _generate(
    model: torch.nn.Module,
    input_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    sampling: SamplingParams | None,
    eos_token_id: int | Iterable[int] | None,
    seed: int,
    method: str,
    extra: dict | None = None,
    generate_kwargs: dict | None = None,
    meter: Any = None,
    count_forwards: bool = True,
) -> DecodeResult:
    """One ``model.generate`` call, timed and counted (the shared body of every ``generate`` baseline).

    Args:
        extra: further ``GenerationConfig`` fields (prompt lookup's, the draft's settings).
        generate_kwargs: further ``generate`` arguments (``assistant_model``, the tokenizers).
        meter: a context manager entered around the call beside the target's counter (the draft's
            forward meter); its ``stats()`` go into ``DecodeResult.stats``.
        count_forwards: count and time forwards with a forward hook pair; False: one forward per new
            token (plain AR only, where that is what generate does), and no forward time (NaN).
    """
    sampling = sampling or SamplingParams()
    validate_max_new_tokens(max_new_tokens)
    prompt = prompt_ids_as_list(input_ids)
    stop_ids = sorted(eos_set(eos_token_id))
    device = model_device(model)
    # Every field is spelled out, and the checkpoint's own generation_config is hidden during the
    # call (see _checkpoint_generation_config_hidden): the baseline decodes exactly as our config says.
    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        min_new_tokens=0,
        do_sample=sampling.do_sample,
        temperature=sampling.temperature if sampling.do_sample else None,
        top_k=sampling.top_k if sampling.do_sample else None,
        top_p=sampling.top_p if sampling.do_sample else None,
        # An empty list (not None) stops generate from falling back to the checkpoint's own EOS.
        eos_token_id=stop_ids,
        pad_token_id=stop_ids[0] if stop_ids else 0,
        **(extra or {}),
    )
    prompt_tensor = torch.tensor([prompt], device=device)
    counter = _ForwardCounter(model, len(prompt), device) if count_forwards else contextlib.nullcontext()
    sync = device_synchronizer(device)
    torch.manual_seed(seed)
    with counter, _checkpoint_generation_config_hidden(model), meter or contextlib.nullcontext():
        sync()
        started = time.perf_counter()
        output = model.generate(  # type: ignore[operator]  # a PreTrainedModel (nn.Module attributes type as tensors)
            prompt_tensor,
            attention_mask=torch.ones_like(prompt_tensor),
            generation_config=config,
            **(generate_kwargs or {}),
        )
        sync()
        wall = time.perf_counter() - started
    tokens = output[0, len(prompt) :].tolist()
    forward_time = float("nan")
    if isinstance(counter, _ForwardCounter):
        steps, accepted, inputs = (
            counter.calls,
            counter.accept_lengths(len(prompt) + len(tokens)),
            counter.input_lengths,
        )
        forward_time = counter.forward_time_s
    else:
        steps, accepted, inputs = len(tokens), [1] * len(tokens), [len(prompt)] + [1] * (len(tokens) - 1)
    return DecodeResult(
        tokens=tokens,
        steps=steps,
        accept_lengths=accepted,
        wall_time_s=wall,
        forward_time_s=forward_time,
        method=method if not sampling.do_sample else f"{method}_sampling",
        step_tokens=inputs,
        stats=meter.stats() if meter is not None else {},
    )


@contextmanager
def _checkpoint_generation_config_hidden(model: torch.nn.Module) -> Iterator[None]:
    """Swap in a blank ``model.generation_config`` for the duration of one ``generate`` call.

    ``generate`` fills every field our config leaves unset (None) from the checkpoint's generation
    config: a checkpoint asking for ``repetition_penalty``, ``no_repeat_ngram_size``, ``min_p``,
    ``bad_words_ids``, ``suppress_tokens``, ``sequence_bias``... would silently change the AR and
    prompt-lookup arms but not lookahead, and so the speedup and ``matches_ar``. Hiding it leaves
    only our explicit settings and transformers' neutral global defaults.
    """
    saved = model.generation_config
    model.generation_config = GenerationConfig()  # type: ignore[assignment]  # an attribute of the model
    try:
        yield
    finally:
        model.generation_config = saved


class _ForwardCounter:
    """Counts model forward passes, the cache length each one started from and its input tokens, and
    times them: the seconds inside the model's forwards, as the engine's loops record them
    (``DecodeResult.forward_time_s``), so that the step-cost model (``stats.step_cost``) can add the
    time ``generate`` spends outside them (its logits processing, stopping checks, a draft model's
    forwards) to AR's and the Hugging Face arms' predicted time.

    The cache always lags the sequence by one token (the newest token is fed at the next step), so
    the sequence length after forward k is the cache length seen by forward k+1, plus one.

    Cost per forward: the pre-hook it already ran plus one post-hook, two ``perf_counter`` reads and,
    on a GPU (``Stopwatch``), two device synchronisations; on a CPU nothing waits (no synchronisation).
    """

    def __init__(self, model: torch.nn.Module, prompt_length: int, device: torch.device) -> None:
        self._model = model
        self._prompt_length = prompt_length
        self._cache_key = cache_argument_name(model)
        self._cache_lengths: list[int] = []
        self.input_lengths: list[int] = []
        self._clock = Stopwatch(device)
        self._handles: list[Any] = []  # the hooks' handles, while inside the ``with`` block

    @property
    def calls(self) -> int:
        return len(self._cache_lengths)

    @property
    def forward_time_s(self) -> float:
        """Seconds spent inside the model's forwards so far (device-synchronised)."""
        return self._clock.total

    def __enter__(self) -> _ForwardCounter:
        self._handles = [
            self._model.register_forward_pre_hook(self._record, with_kwargs=True),
            self._model.register_forward_hook(self._stop),
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()

    def _record(self, module, args, kwargs) -> None:
        cache = kwargs.get(self._cache_key, kwargs.get("past_key_values"))
        self._cache_lengths.append(cache.get_seq_length() if cache is not None else 0)
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        self.input_lengths.append(int(input_ids.shape[-1]))
        # Last in the pre-hook, so that the counting above is outside the timed region.
        self._clock.start()

    def _stop(self, module, args, output) -> None:
        self._clock.stop()

    def accept_lengths(self, final_length: int) -> list[int]:
        """Tokens emitted by each forward pass (prefill first); they sum to the new tokens."""
        lengths_after = [length + 1 for length in self._cache_lengths[1:]] + [final_length]
        before = [self._prompt_length, *lengths_after[:-1]]
        return [after - start for after, start in zip(lengths_after, before, strict=True)]
