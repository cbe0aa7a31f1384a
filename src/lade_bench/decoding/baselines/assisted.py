"""Draft-model speculative decoding through transformers' own assisted generation.

``model.generate(assistant_model=draft)``: the draft proposes up to ``num_assistant_tokens`` tokens,
the target verifies them in one forward pass and keeps the longest agreeing prefix plus its own next
token. Greedy output is the target's greedy output; sampling is transformers' speculative sampling,
which keeps the target's distribution. When the draft's tokenizer differs from the target's,
transformers' *universal assisted decoding* re-tokenises the text between the two (``tokenizer`` and
``assistant_tokenizer``); :func:`pair_draft` decides that from the two tokenizers.

Counting follows every other method: ``steps`` and ``accept_lengths`` are the target's forward
passes (prefill included), the draft's forwards and the device-synchronised time inside them go to
``stats["draft_forwards"]`` and ``stats["draft_time_s"]``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from transformers import GenerationConfig

from lade_bench.decoding.baselines.autoregressive import _generate
from lade_bench.decoding.core.params import (
    ASSISTED_CONFIDENCE_THRESHOLD,
    ASSISTED_LOOKBEHIND,
    ASSISTED_NUM_TOKENS,
    ASSISTED_SCHEDULE,
    DecodeResult,
    DecodingConfigError,
    SamplingParams,
    require_int,
    validate_max_new_tokens,
)
from lade_bench.decoding.core.timing import device_synchronizer, model_device
from lade_bench.decoding.model_checks.support import check_model_support

# transformers' schedules for the draft length. "heuristic" is left out on purpose: it carries the
# adapted length from one generate call to the next (it writes it into the draft's generation
# config), so a row would depend on which samples, warm-up and arms ran before it; resumed and fresh
# cells would differ. "heuristic_transient" adapts within one generation only.
SCHEDULES = ("constant", "heuristic_transient")


@dataclass(frozen=True)
class Draft:
    """A draft model paired with a target (see :func:`pair_draft`).

    Attributes:
        model: the draft (assistant) model, on the target's input device.
        tokenizers: ``(target tokenizer, draft tokenizer)`` for universal assisted decoding (the
            vocabularies differ); None when the two share one vocabulary.
    """

    model: torch.nn.Module
    tokenizers: tuple[Any, Any] | None = None

    @property
    def universal(self) -> bool:
        """True when generation re-tokenises between target and draft (different vocabularies)."""
        return self.tokenizers is not None


def pair_draft(
    target: torch.nn.Module, draft: torch.nn.Module, target_tokenizer: Any = None, draft_tokenizer: Any = None
) -> Draft:
    """Pair ``draft`` with ``target``: shared vocabulary, or universal assisted decoding when they differ.

    The vocabularies are the same when both tokenizers map the same strings to the same ids (or when
    no tokenizers are given, when the models' vocabulary sizes agree: a tiny test pair).

    Raises:
        DecodingConfigError: the vocabularies differ and the tokenizers are missing; or the tokenizers
            differ while the models' vocabulary sizes are equal, which transformers cannot tell apart
            from a shared vocabulary (it refuses ``assistant_tokenizer`` then).
    """
    target_size = _vocab_size(target)
    draft_size = _vocab_size(draft)
    if target_tokenizer is None or draft_tokenizer is None:
        if target_size != draft_size:
            raise DecodingConfigError(
                f"the draft's vocabulary ({draft_size} ids) differs from the target's ({target_size}); "
                "universal assisted decoding needs both tokenizers: pass target_tokenizer and draft_tokenizer"
            )
        return Draft(draft)
    same_tokens = target_tokenizer is draft_tokenizer or target_tokenizer.get_vocab() == draft_tokenizer.get_vocab()
    if same_tokens and target_size == draft_size:
        return Draft(draft)
    if not same_tokens and target_size == draft_size:
        raise DecodingConfigError(
            f"the draft's tokenizer differs from the target's but both models have {target_size} ids; "
            "transformers then treats them as one vocabulary (and refuses assistant_tokenizer), so the "
            "draft's ids would mean other tokens: use a draft with the target's tokenizer, or one whose "
            "vocabulary size differs (universal assisted decoding)"
        )
    return Draft(draft, (target_tokenizer, draft_tokenizer))


def _vocab_size(model: torch.nn.Module) -> int:
    config: Any = model.config  # a PretrainedConfig (nn.Module attributes type as tensors)
    return int(config.get_text_config().vocab_size)


def validate_assistant_settings(
    num_assistant_tokens: int,
    num_assistant_tokens_schedule: str,
    assistant_confidence_threshold: float,
    assistant_lookbehind: int,
    target_lookbehind: int,
) -> None:
    """Range-check the draft settings (``assistant.*``), naming the bad value and the allowed ones.

    Raises:
        DecodingConfigError: a value out of range.
    """
    require_int("assistant.num_assistant_tokens", num_assistant_tokens, minimum=1)
    require_int("assistant.assistant_lookbehind", assistant_lookbehind, minimum=1)
    require_int("assistant.target_lookbehind", target_lookbehind, minimum=1)
    if num_assistant_tokens_schedule not in SCHEDULES:
        raise DecodingConfigError(
            f"assistant.num_assistant_tokens_schedule={num_assistant_tokens_schedule!r} is not allowed; "
            f"use one of {list(SCHEDULES)} ('heuristic' carries state across generations, see SCHEDULES)"
        )
    threshold = assistant_confidence_threshold
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0.0 <= threshold < 1.0:
        raise DecodingConfigError(
            f"assistant.assistant_confidence_threshold={threshold!r} is not allowed: use a number in [0, 1) "
            "(0: the draft always proposes num_assistant_tokens tokens)"
        )


@torch.no_grad()
def assisted_generate(
    model: torch.nn.Module,
    input_ids: Sequence[int] | torch.Tensor,
    draft: Draft | torch.nn.Module,
    max_new_tokens: int,
    *,
    num_assistant_tokens: int = ASSISTED_NUM_TOKENS,
    num_assistant_tokens_schedule: str = ASSISTED_SCHEDULE,
    assistant_confidence_threshold: float = ASSISTED_CONFIDENCE_THRESHOLD,
    assistant_lookbehind: int = ASSISTED_LOOKBEHIND,
    target_lookbehind: int = ASSISTED_LOOKBEHIND,
    sampling: SamplingParams | None = None,
    eos_token_id: int | Iterable[int] | None = None,
    seed: int = 0,
) -> DecodeResult:
    """Speculative decoding with a draft model: transformers' ``generate(assistant_model=...)``.

    Args:
        model: the target.
        input_ids: the prompt.
        draft: a :class:`Draft` (from :func:`pair_draft`), or a draft model sharing the target's vocabulary.
        num_assistant_tokens: most tokens the draft proposes per target forward (>= 1).
        num_assistant_tokens_schedule: ``constant`` or ``heuristic_transient`` (see ``SCHEDULES``).
        assistant_confidence_threshold: the draft stops proposing once its top probability falls
            below this (transformers adapts it within a generation when scikit-learn is installed);
            0 turns it off.
        assistant_lookbehind, target_lookbehind: universal assisted decoding only: tokens re-encoded
            on each side to align the two tokenisations.
        sampling: None or greedy: the target's greedy output; do_sample: speculative sampling
            (shared vocabulary only).

    Raises:
        DecodingConfigError: a setting out of range, or sampling with universal assisted decoding
            (it prunes the draft's LM head in place, which this benchmark's shared draft cannot allow).
    """
    validate_max_new_tokens(max_new_tokens)
    validate_assistant_settings(
        num_assistant_tokens,
        num_assistant_tokens_schedule,
        assistant_confidence_threshold,
        assistant_lookbehind,
        target_lookbehind,
    )
    paired = draft if isinstance(draft, Draft) else pair_draft(model, draft)
    sampling = sampling or SamplingParams()
    if paired.universal and sampling.do_sample:
        raise DecodingConfigError(
            "sampling with a draft of another vocabulary (universal assisted decoding) is not supported: "
            "transformers prunes the draft's LM head in place for it; use sampling=greedy, or a draft "
            "with the target's tokenizer"
        )
    # The target verifies the draft's tokens on its cache like every drafting method; the draft's own
    # decoding only proposes, so a draft the checks would refuse costs speed, never exactness.
    check_model_support(model, custom_mask=False)
    kwargs: dict[str, Any] = {"assistant_model": paired.model}
    if paired.tokenizers is not None:
        kwargs.update(tokenizer=paired.tokenizers[0], assistant_tokenizer=paired.tokenizers[1])
    draft_config = GenerationConfig(
        num_assistant_tokens=num_assistant_tokens,
        num_assistant_tokens_schedule=num_assistant_tokens_schedule,
        assistant_confidence_threshold=assistant_confidence_threshold,
        assistant_lookbehind=assistant_lookbehind,
        target_lookbehind=target_lookbehind,
    )
    meter = DraftMeter(paired.model, draft_config, guard_cache=paired.universal)
    return _generate(
        model, input_ids, max_new_tokens, sampling, eos_token_id, seed, "assisted", generate_kwargs=kwargs, meter=meter
    )


class DraftMeter:
    """Around one generation: the draft runs under ``draft_config`` alone, its forwards counted and timed.

    The draft's own checkpoint generation config is swapped out for the call, as the target's is
    (``_checkpoint_generation_config_hidden``): transformers reads the draft settings from it, and a
    checkpoint's extra fields (repetition penalty, ...) would change the proposals. Timing brackets
    each draft forward with a device synchronisation, so ``draft_time_s`` is the draft's share of the
    wall time (the synchronisations themselves add a little to the arm's wall time on a GPU).
    """

    def __init__(self, draft: torch.nn.Module, draft_config: GenerationConfig, *, guard_cache: bool = False) -> None:
        """Meter ``draft``'s forwards; ``draft_config`` is its generation config during the call.

        ``guard_cache``: also keep the draft's KV cache a true prefix of each round's input
        (:class:`DraftCacheGuard`; universal assisted decoding needs it).
        """
        self._draft = draft
        self._config = draft_config
        self._guard = DraftCacheGuard(draft) if guard_cache else None
        self._sync = device_synchronizer(model_device(draft))
        self.forwards = 0
        self.time_s = 0.0
        self._started = 0.0
        self._context: Any = None  # the swapped config and hooks, while inside the ``with`` block

    def stats(self) -> dict[str, float]:
        """``draft_forwards`` and ``draft_time_s`` of the generation just measured."""
        return {"draft_forwards": float(self.forwards), "draft_time_s": self.time_s}

    def __enter__(self) -> DraftMeter:
        self._context = self._swapped_config()
        self._context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._context.__exit__(*exc)

    @contextmanager
    def _swapped_config(self) -> Iterator[None]:
        saved = self._draft.generation_config
        self._draft.generation_config = self._config  # type: ignore[assignment]  # an attribute of the model
        before = self._draft.register_forward_pre_hook(self._before)
        after = self._draft.register_forward_hook(self._after)
        try:
            with self._guard or nullcontext():
                yield
        finally:
            before.remove()
            after.remove()
            self._draft.generation_config = saved

    def _before(self, module: torch.nn.Module, args: Any) -> None:
        self._sync()
        self._started = time.perf_counter()

    def _after(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        self._sync()
        self.time_s += time.perf_counter() - self._started
        self.forwards += 1


class DraftCacheGuard:
    """Around one generation: each draft round starts from a KV cache that is a true prefix of its input.

    transformers' universal assisted decoding (``AssistedCandidateGeneratorDifferentTokenizers``,
    transformers 5.x) rolls the draft's cache back by a length counted in *target* tokens while the
    cache holds *draft* tokens, and it rewrites the draft's last tokens in place when the target's
    text re-tokenises differently. The cache can then hold as many tokens as the round's input (the
    draft's prefill gets 0 tokens and fails: "cannot reshape tensor of 0 elements") or keep states of
    tokens that were replaced (the draft then proposes from a context it was not given). Here the
    draft's ``generate`` is wrapped for the call: it remembers the ids each round returned (whose
    prefix the cache holds) and, before the next round, crops the cache to the longest prefix those
    ids share with the new input, leaving at least one input token to prefill. The target verifies
    every proposal, so this changes only which tokens the draft proposes, never the output.
    """

    def __init__(self, draft: torch.nn.Module) -> None:
        """Guard ``draft``'s cache while inside the ``with`` block."""
        self._draft = draft
        self._cached_ids: torch.Tensor | None = None  # a copy: transformers edits its own in place
        self.crops = 0  # rounds whose cache was cut further than transformers' own rollback

    def __enter__(self) -> DraftCacheGuard:
        original: Any = self._draft.generate  # a PreTrainedModel method (nn.Module types attributes as tensors)

        def guarded(*args: Any, **kwargs: Any) -> Any:
            self._crop_to_common_prefix(kwargs.get("input_ids"), kwargs.get("cache"))
            output = original(*args, **kwargs)
            sequences = getattr(output, "sequences", None)
            self._cached_ids = None if sequences is None else sequences.detach().clone()
            return output

        # An instance attribute shadows the class's method for this call only (removed on exit).
        self._draft.generate = guarded  # type: ignore[assignment]  # see `original` above
        return self

    def __exit__(self, *exc: Any) -> None:
        del self._draft.generate
        self._cached_ids = None

    def _crop_to_common_prefix(self, input_ids: torch.Tensor | None, cache: Any) -> None:
        if input_ids is None or cache is None or self._cached_ids is None:
            return
        cached = int(cache.get_seq_length())
        if cached == 0:
            return
        known = self._cached_ids[:, :cached]
        width = min(known.shape[-1], input_ids.shape[-1])
        differs = (known[:, :width] != input_ids[:, :width].to(known.device)).any(dim=0).nonzero()
        common = int(differs[0]) if len(differs) else width
        keep = min(common, input_ids.shape[-1] - 1)
        if keep < cached:
            cache.crop(keep - cached)
            self.crops += 1
