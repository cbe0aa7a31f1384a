"""Every registered greedy method on one model emits exactly AR greedy's tokens, on every architecture here.

The methods come from the registry (one model on one device, not the reference arm): a method
registered later inherits this grid without being named in it. Each generation goes through
``run_generation`` (the entry the runner, bench and gpu_check use, model checks included) with the
config sections the method reads as the runner builds them from the composed config: once with the
config's defaults, once with every integer halved and every flag flipped (each change kept where the
plan accepts it). The output is compared with transformers' AR greedy and with a no-cache argmax
loop, and the counting rules every method shares are checked: one accept length and one step-token
count per forward pass, the accept lengths summing to the tokens emitted. A method that drafts from an
external resource (a datastore) gets one built from the grid's own runs (``grid_resources.py``), and
the grid checks that its drafts are accepted.

Method-specific behaviour (lookahead's N/W/G shapes and verification layouts, Jacobi's block of 1,
prompt lookup's candidate rule) stays in each method's own tests.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.methods import (
    REFERENCE,
    REPLICA,
    GenerationRequest,
    Method,
    registered_methods,
    run_generation,
    runs_on_one_model,
)
from lade_bench.runner import plan_cell, register_configs
from lade_bench.runner.arms import method_settings

from ..methods import toy_drafter
from ..runner.conftest import CONF_DIR, TINY
from .grid_resources import GRID_RESOURCES
from .helpers import no_cache_greedy, repetitive_prompt

# Not the reference arm, nor a timing reference on other numerics (``Method.exact``: ar_standard).
METHODS = [m for m in registered_methods() if runs_on_one_model(m) and m.name != REFERENCE and m.exact]

# Attention and position variants the engine handles differently: learned positions (gpt2), partial
# rotary (gpt_neox, phi3), QK-norm (qwen3), sliding windows (mistral_sliding everywhere, gemma2/gemma3
# interleaved with global layers, logits soft-capped and tied to the embeddings), mixtures of experts
# (qwen2_moe) and DeepSeek's latent attention with experts (deepseek_v3). The other tiny families run
# lookahead in tests/decoding/test_exactness.py.
ARCHITECTURES = (
    "llama",
    "qwen3",
    "phi3",
    "gpt2",
    "gpt_neox",
    "mistral_sliding",
    "gemma2",
    "gemma3",
    "qwen2_moe",
    "deepseek_v3",
)
SETTINGS = ("defaults", "halved")
PROMPT_LEN, NEW_TOKENS = 32, 40


def _compose(overrides: Sequence[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[*TINY, *overrides])


def _accepted(method: Method, overrides: Sequence[str]) -> DictConfig | None:
    """The composed cell config running ``method`` with ``overrides``, or None when the plan refuses it."""
    try:
        cfg = _compose([f"arms=[{REFERENCE},{method.name}]", *overrides])
        plan_cell(cfg)
    except ValueError:  # the plan's refusals (CellConfigError, DecodingConfigError) are ValueErrors
        return None
    return cfg


def _changed(value: Any) -> Any:
    """Another legal-looking value of a setting: integers halved (at least 1), flags flipped; else None."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int) and value > 1:
        return value // 2
    return None


@functools.cache
def settings_of(method_name: str, variant: str, resources: tuple[str, ...] = ()) -> dict[str, Any]:
    """The settings ``method_name``'s generate receives in a cell composed from the configs (plus the
    ``resources`` overrides naming what it needs built, e.g. a datastore)."""
    register_configs()
    method = next(m for m in METHODS if m.name == method_name)
    overrides: list[str] = list(resources)
    if variant == "halved":
        base = _accepted(method, overrides)
        assert base is not None, f"the plan refuses {method.name} with the config's defaults"
        for section in method.sections:
            for key, value in base[section].items():
                new = _changed(value)
                candidate = f"{section}.{key}={str(new).lower() if isinstance(new, bool) else new}"
                if new is not None and _accepted(method, [*overrides, candidate]) is not None:
                    overrides.append(candidate)
    cfg = _accepted(method, overrides)
    assert cfg is not None, f"the plan refuses {method.name} with {overrides}"
    return method_settings(plan_cell(cfg), method)


@functools.cache
def _prompt(arch: str) -> tuple[int, ...]:
    return tuple(repetitive_prompt(PROMPT_LEN, seed=zlib.crc32(arch.encode()) % 1000))


@pytest.fixture(scope="module")
def references(tiny_models):
    """(arch, budget, stop ids) -> AR greedy's tokens, also checked against the no-cache loop (once each)."""
    cache: dict[tuple, list[int]] = {}

    def reference(arch: str, budget: int, stop_ids: tuple[int, ...] = ()) -> list[int]:
        key = (arch, budget, stop_ids)
        if key not in cache:
            model, prompt = tiny_models[arch], list(_prompt(arch))
            tokens = autoregressive_generate(model, prompt, budget, eos_token_id=list(stop_ids)).tokens
            assert tokens == no_cache_greedy(model, prompt, budget, stop_ids), f"AR is not the no-cache argmax ({arch})"
            cache[key] = tokens
        return cache[key]

    return reference


@pytest.fixture(scope="module")
def resources(tiny_models, references, tmp_path_factory):
    """Method name -> the overrides naming what its cells need (``grid_resources.py``), built from the
    grid's own runs (each architecture's prompt and AR continuation), so that its drafts get accepted."""
    from lade_bench.models.loading import tokenizer_source

    register_configs()
    runs = [list(_prompt(arch)) + references(arch, NEW_TOKENS) for arch in ARCHITECTURES]
    tokenizer = tokenizer_source(_compose([]).model)
    folder = tmp_path_factory.mktemp("grid_resources")
    return {name: tuple(build(runs, folder / name, tokenizer)) for name, build in GRID_RESOURCES.items()}


def _run(method: Method, model, prompt: Sequence[int], budget: int, settings, stop_ids: Sequence[int] = ()):
    request = GenerationRequest({REPLICA: model}, list(prompt), budget, list(stop_ids), seed=3, settings=settings)
    return run_generation(method, request)


def _assert_counts(result, budget: int, prompt_len: int) -> None:
    """The counting rules shared by every method (``DecodeResult``'s contract)."""
    assert len(result.tokens) <= budget
    assert result.steps == len(result.accept_lengths) >= 1
    assert sum(result.accept_lengths) == len(result.tokens)
    assert all(n >= 1 for n in result.accept_lengths[1:])
    assert result.step_tokens is not None and len(result.step_tokens) == result.steps
    if result.accept_lengths[0] == 0:  # a prefill that holds back the prompt's last token for the first step
        assert result.step_tokens[0] == prompt_len - 1  # (Token Recycling's authors' loop, draft_tree.py)
    else:
        assert result.accept_lengths[0] == 1 and result.step_tokens[0] >= prompt_len  # the whole prompt
    assert all(n >= 1 for n in result.step_tokens)


def _method_id(method: Method) -> str:
    return method.name


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("variant", SETTINGS)
@pytest.mark.parametrize("method", METHODS, ids=_method_id)
def test_method_equals_ar_greedy(tiny_models, references, resources, method, variant, arch):
    settings = settings_of(method.name, variant, resources.get(method.name, ()))
    result = _run(method, tiny_models[arch], _prompt(arch), NEW_TOKENS, settings)
    assert result.tokens == references(arch, NEW_TOKENS)
    _assert_counts(result, NEW_TOKENS, PROMPT_LEN)
    if method.name in resources:  # a resource built from this very run: exact *with* accepted drafts
        assert max(result.accept_lengths[1:]) > 1, result.accept_lengths


@pytest.mark.parametrize("arch", ["llama", "gpt2", "gemma3"])
@pytest.mark.parametrize("method", METHODS, ids=_method_id)
def test_method_stops_where_ar_stops(tiny_models, references, resources, method, arch):
    """A stop id taken from the free run (so that it occurs mid-run) ends the generation after it, as in AR."""
    free_run = references(arch, NEW_TOKENS)
    stop = free_run[NEW_TOKENS // 2]
    expected = references(arch, NEW_TOKENS, (stop,))
    assert expected[-1] == stop and len(expected) < NEW_TOKENS
    for variant in SETTINGS:
        settings = settings_of(method.name, variant, resources.get(method.name, ()))
        result = _run(method, tiny_models[arch], _prompt(arch), NEW_TOKENS, settings, [stop])
        assert result.tokens == expected, variant
        _assert_counts(result, NEW_TOKENS, PROMPT_LEN)


@pytest.mark.parametrize("method", METHODS, ids=_method_id)
def test_method_with_a_budget_of_one_token(tiny_models, references, resources, method):
    for arch in ("llama", "gemma2"):
        settings = settings_of(method.name, "defaults", resources.get(method.name, ()))
        result = _run(method, tiny_models[arch], _prompt(arch), 1, settings)
        assert result.tokens == references(arch, 1)
        _assert_counts(result, 1, PROMPT_LEN)


@pytest.mark.parametrize("declared", [toy_drafter.DRAFTER, toy_drafter.BROKEN], ids=lambda d: d.name)
def test_the_grid_takes_a_drafter_declared_later_and_catches_one_that_breaks_exactness(
    tiny_models, references, declared
):
    """A drafter registered after the built-ins meets the grid's rule (so it is among its cases when registered
    before collection), passes its comparison when exact and fails it when its engine changes a token."""
    arch = "llama"
    with toy_drafter.registered(declared) as name:
        method = next(m for m in registered_methods() if m.name == name)
        assert runs_on_one_model(method) and method.name != REFERENCE and method.exact  # the rule of METHODS
        result = _run(method, tiny_models[arch], _prompt(arch), NEW_TOKENS, {})
    exact = result.tokens == references(arch, NEW_TOKENS)
    assert exact is (declared is toy_drafter.DRAFTER), result.tokens


def test_the_grid_is_not_empty_and_leaves_out_the_reference():
    """The grid compares against AR, so AR is not in it; the built-in multi-token methods are."""
    assert REFERENCE not in {m.name for m in METHODS}
    assert len(METHODS) >= 3


def _budget_candidates() -> list[tuple[Method, int, dict[str, Any]]]:
    """(method, index, candidate) for every candidate of every declared budget (``Method.budget``)."""
    from lade_bench.methods.budget import candidate_grid

    return [
        (method, index, candidate)
        for method in METHODS
        if method.budget is not None
        for index, candidate in enumerate(candidate_grid(method.budget.values))
    ]


@pytest.mark.parametrize(
    ("method", "index", "candidate"), _budget_candidates(), ids=lambda v: v.name if isinstance(v, Method) else str(v)
)
def test_every_budget_candidate_equals_ar_greedy(tiny_models, references, resources, method, index, candidate):
    """Each setting the tuner may pick (``python -m lade_bench.tune tune.methods=[...]``) is accepted by the
    method's checks and keeps its greedy output AR's, on one architecture (the grid above covers the others)."""
    from lade_bench.methods.budget import plain

    settings = dict(settings_of(method.name, "defaults", resources.get(method.name, ())))
    section = {**dict(settings[method.own_section].items()), **{k: plain(v) for k, v in candidate.items()}}
    settings[method.own_section] = section
    assert method.refuse is None or method.refuse(settings, plan_cell(_compose([])).facts) is None
    result = _run(method, tiny_models["llama"], _prompt("llama"), NEW_TOKENS, settings)
    assert result.tokens == references("llama", NEW_TOKENS)
    _assert_counts(result, NEW_TOKENS, PROMPT_LEN)
