"""A behavioural probe of what every decoding method's exactness rests on, run once per loaded model.

The checks in ``checks.py`` refuse what a model *is* (its config and forward signature); they know
only the features someone has named. The probe asks what the model *does*, on a handful of tiny
forwards through the engine's own code paths, and refuses the model with the failed property named:

- **(a) appended rows stay hidden**: a prompt's logits do not change when more tokens follow it in
  the same forward (every method feeds guesses behind the last accepted token and keeps the rows
  before them; a router or a dynamic mask that mixes the tokens of one forward breaks this);
- **(b) the cache continues the sequence**: a forward continued from the KV cache, with explicit
  position ids, gives the full forward's logits for the same tokens (a model that drops the cache,
  or counts positions differently from ``generate``, breaks this);
- **(c) side-by-side branches are independent**: two branches fed in one step at the same position
  ids, each hidden from the other by the step mask (the shape of a lookahead or draft-tree step,
  where a row's position id differs from its index in the input), each get the logits they get
  when fed alone (a model that ignores the custom mask or the position ids, or applies a window by
  input index, breaks this);
- **(d) the engine's cache decodes like generate's**: tokens fed together on the engine's cache
  (``kv_cache.engine_cache``) get the logits they get fed one at a time on the cache the model
  builds for itself, ``generate``'s decoding path (a model whose forward reads the cache's structure
  and computes something else on a cache built otherwise, or whose rows depend on which tokens
  share a forward, breaks this).

Cost: eleven forwards of at most 16 tokens, once per model, dtype and attention
implementation (the verdict is kept on the model object). What it cannot see is written in
docs/engine.md ("The behavioural probe").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from lade_bench.decoding.core.checks import UnsupportedModelError, attention_implementation_of
from lade_bench.decoding.core.executor import StepInput
from lade_bench.decoding.core.forward import CachedForward, following_positions
from lade_bench.decoding.core.position_limits import position_thresholds
from lade_bench.decoding.core.single_device import SingleDeviceExecutor
from lade_bench.decoding.core.timing import cache_argument_name, model_device, model_dtype

# The longest sequence (largest cache length + input index + 1) a probe forward builds: long enough
# to pass an 8-token local window by input index in (c), short enough to cost nothing next to loading.
PROBE_LENGTH = 16

# Longest branch of (c), in tokens.
PROBE_BRANCH = 4

# Tokens (d) decodes one at a time on the model's own cache: the first shows a cache that differs
# from the engine's, the next ones rows that depend on which tokens share a forward.
PROBE_DECODED = 3

# Where the verdicts live on a model: keyed by (dtype, attention implementation), since either
# changes which kernels run. On the model object, so the cache lives and dies with the model.
VERDICTS_ATTRIBUTE = "_lade_bench_probe_verdicts"

# float32/float64: the largest |difference| between two computations of the same logits, relative to
# the largest |logit|, that is still reduction-order noise (measured: about 1e-6 in float32 on the
# embedded SmolLM2 and Gemma-3-270M, so 1e-3 leaves room for other kernels; a broken property
# moves logits by far more).
RELATIVE_TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-3}

# float16/bfloat16: reduction-order noise reaches about 6% of the largest logit (measured on the
# embedded Gemma-3-270M under SDPA), as large as some real breaks, so there a row fails only when
# its top-1 token changes to one the reference scores this many logits lower: the engine's own
# rule for telling a near-tie flip from an engine error (``divergence``, mismatch.margin_tolerance).
HALF_PRECISION_MARGIN = 1.0


@dataclass(frozen=True)
class ProbeShape:
    """The probe's token counts, fitted under a model's position thresholds.

    Attributes:
        prompt: tokens of the prompt of (a) and (b).
        appended: tokens appended behind the prompt in (a).
        split: of them, how many (b) prefills before continuing from the cache.
        prefix: cached tokens before cur in (c).
        branch: tokens of each of (c)'s two branches (0: (c) does not fit and is skipped).
    """

    prompt: int
    appended: int
    split: int
    prefix: int
    branch: int


def probe_shape(model: torch.nn.Module) -> ProbeShape:
    """Token counts that keep every probe forward below the model's position thresholds.

    A model exact only below some length (``position_limits``) is probed below it, as the runner
    lets it run; (c) is skipped when two branches cannot fit (then only the threshold's own check
    and the name-based checks guard the reordered layout).
    """
    budget = min([PROBE_LENGTH, *(threshold.limit for threshold in position_thresholds(model))])
    appended = min(2, max(budget - 2, 0))
    prompt = budget - appended
    prefix = max(1, budget - 1 - 2 * PROBE_BRANCH)
    branch = max(0, min(PROBE_BRANCH, (budget - 1 - prefix) // 2))
    return ProbeShape(prompt, appended, prompt // 2, prefix, branch)


def check_model_behaviour(model: torch.nn.Module) -> None:
    """Raise UnsupportedModelError naming the first property (a), (b), (c) or (d) ``model`` breaks.

    Runs the probe once per model object, dtype and attention implementation; later calls read the
    kept verdict (a refusal is raised again with the same message).
    """
    verdicts = model.__dict__.setdefault(VERDICTS_ATTRIBUTE, {})
    key = (str(model_dtype(model)), attention_implementation_of(model))
    if key not in verdicts:
        verdicts[key] = _probe(model)
    problem = verdicts[key]
    if problem is not None:
        raise UnsupportedModelError(problem)


@torch.no_grad()
def _probe(model: torch.nn.Module) -> str | None:
    shape = probe_shape(model)
    if shape.prompt < 2:
        return None  # nothing fits below the threshold; the position-limit check refuses every run
    ids = _probe_tokens(model, shape.prompt + shape.appended)
    tolerance = RELATIVE_TOLERANCE.get(model_dtype(model))
    name = _model_name(model)
    prompt = ids[: shape.prompt]
    full = CachedForward(model)(prompt)
    if shape.appended:
        longer = CachedForward(model)(ids)[: shape.prompt]
        if not _close(full, longer, tolerance):
            return _refusal(
                name,
                "(a) appended rows stay hidden",
                f"the logits of a {shape.prompt}-token prompt change when {shape.appended} tokens follow it "
                "in the same forward (a layer mixes the tokens of one forward: a router or a dynamic mask)",
                _gap(full, longer),
            )
    continued = CachedForward(model)
    continued(prompt[: shape.split])
    rest = continued(prompt[shape.split :])
    if not _close(full[shape.split :], rest, tolerance):
        return _refusal(
            name,
            "(b) the cache continues the sequence",
            f"a forward of {shape.prompt - shape.split} tokens continued from the cache of the first "
            f"{shape.split}, with explicit position ids, does not give the full forward's logits (the "
            "model ignores the cache, or counts positions differently from generate)",
            _gap(full[shape.split :], rest),
        )
    if shape.branch:
        problem = _check_branches(model, ids, full, shape, tolerance, name)
        if problem is not None:
            return problem
    return _check_generate_path(model, prompt, rest, shape.split, tolerance, name)


def _check_branches(
    model: torch.nn.Module, ids: list[int], full: torch.Tensor, shape: ProbeShape, tolerance: float | None, name: str
) -> str | None:
    """Property (c): two branches at the same positions in one step equal each branch fed alone.

    The first branch continues the prompt, so the full forward's rows are its logits alone (by (b),
    already checked); the second holds the same tokens reversed, and one more plain forward gives
    its logits alone.
    """
    cur = ids[shape.prefix]
    first = tuple(ids[shape.prefix + 1 : shape.prefix + 1 + shape.branch])
    second = tuple(reversed(first))  # other tokens at the same positions: a leak between branches shows
    executor = SingleDeviceExecutor(model, "flat", with_logits=True)
    executor.prefill(ids[: shape.prefix], 0)
    step = executor.step(StepInput(shape.prefix, [cur], 1, 1, [first, second]))
    assert step.logits is not None  # with_logits=True
    second_alone = CachedForward(model)([*ids[: shape.prefix + 1], *second])
    alone = (full[shape.prefix + 1 : shape.prefix + 1 + shape.branch], second_alone[shape.prefix + 1 :])
    for index, expected in enumerate(alone):
        together = step.logits[step.candidate_rows[index]]
        if not _close(expected, together, tolerance):
            return _refusal(
                name,
                "(c) side-by-side branches are independent",
                f"two {shape.branch}-token branches fed in one step at the same position ids, each hidden "
                f"from the other by the step mask, do not give branch {index + 1} the logits it gets alone "
                "(the model ignores the custom mask or the position ids, or windows its attention by the "
                "index in the input)",
                _gap(expected, together),
            )
    return None


def _check_generate_path(
    model: torch.nn.Module, prompt: list[int], rest: torch.Tensor, split: int, tolerance: float | None, name: str
) -> str | None:
    """Property (d): the engine's rows of ``prompt[split:]`` (``rest``, fed together on the engine's
    cache after ``prompt[:split]``) equal the first tokens' rows fed one at a time on the cache the
    model builds for itself when given none (``generate``'s cache, ``DynamicCache(config=...)``)."""
    count = min(PROBE_DECODED, len(prompt) - split)
    device = model_device(model)
    key = cache_argument_name(model)
    output = model(
        input_ids=torch.tensor([prompt[:split]], device=device),
        position_ids=following_positions(0, split, device),
        use_cache=True,
    )
    cache = getattr(output, key)
    rows = []
    for index in range(split, split + count):
        output = model(
            input_ids=torch.tensor([[prompt[index]]], device=device),
            position_ids=following_positions(index, 1, device),
            use_cache=True,
            **{key: cache},
        )
        cache = getattr(output, key)
        rows.append(output.logits[0, -1])
    decoded = torch.stack(rows)
    if _close(decoded, rest[:count], tolerance):
        return None
    return _refusal(
        name,
        "(d) the engine's cache decodes like generate's",
        f"the first {count} of {len(rest)} tokens fed in one forward on the engine's cache (after {split} cached "
        "ones) do not get the logits they get fed one at a time on the cache the model builds for itself, as "
        "generate decodes "
        "(the model computes something else on a cache built otherwise, or a token's logits depend on which "
        "tokens share its forward)",
        _gap(decoded, rest[:count]),
    )


def _probe_tokens(model: torch.nn.Module, count: int) -> list[int]:
    """``count`` seeded token ids of the model's vocabulary, avoiding its padding id."""
    config: Any = model.config  # a transformers config (nn.Module attributes are typed as tensors)
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    vocab = int(text.vocab_size)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(min(3, vocab - 1), vocab, (count,), generator=generator).tolist()
    padding = getattr(text, "pad_token_id", None)
    return [(token + 1) % vocab if token == padding else token for token in ids]


def _close(expected: torch.Tensor, actual: torch.Tensor, tolerance: float | None) -> bool:
    """Whether ``actual`` is ``expected`` up to reduction-order noise (``tolerance`` None: half precision)."""
    expected, actual = expected.double(), actual.double()
    if tolerance is not None:
        scale = max(1.0, float(expected.abs().max()))
        return bool(((expected - actual).abs().max() <= tolerance * scale).item())
    chosen = actual.argmax(dim=-1)
    best = expected.max(dim=-1).values
    lost = best - expected.gather(-1, chosen[:, None])[:, 0]
    return bool((lost <= HALF_PRECISION_MARGIN).all().item())


def _gap(expected: torch.Tensor, actual: torch.Tensor) -> str:
    return f"largest logit difference {float((expected.double() - actual.double()).abs().max()):.3g}"


def _model_name(model: torch.nn.Module) -> str:
    config: Any = model.config
    return f"{type(model).__name__} (model_type={getattr(config, 'model_type', None)!r})"


def _refusal(name: str, failed: str, what: str, gap: str) -> str:
    return (
        f"{name} is not supported: the engine's model probe found that property {failed} does not hold: "
        f"{what}; {gap}. Every decoding method here relies on it, so the output would differ from the "
        "model's own decoding. Use the autoregressive baseline for this model (docs/engine.md: the "
        "behavioural probe)"
    )
