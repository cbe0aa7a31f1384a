"""First divergence from AR and the logit margins there; half precision flips only near-ties."""

from __future__ import annotations

import math

import pytest
import torch

from lade_bench.decoding import LookaheadParams, autoregressive_generate, lookahead_generate
from lade_bench.decoding.core.divergence import divergence_margins, first_divergence
from lade_bench.models.tiny import tiny_model

from .helpers import repetitive_prompt


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [([1, 2, 3], [1, 2, 3], None), ([1, 2, 3], [1, 5, 3], 1), ([4], [5], 0), ([1, 2], [1, 2, 3], 2), ([], [], None)],
)
def test_first_divergence(a, b, expected):
    assert first_divergence(a, b) == expected


@pytest.fixture(scope="module")
def exact_run():
    """A float64 tiny model, a prompt, the reference logits at output position 10 and AR's output."""
    model = tiny_model("llama", init_scale=3.0, seed=7)
    prompt = repetitive_prompt(20, seed=3)
    ar = autoregressive_generate(model, prompt, 20).tokens
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ar[:10]])).logits[0, -1]
    return model, prompt, ar, logits


def test_equal_outputs_have_no_divergence(exact_run):
    model, prompt, ar, _ = exact_run
    assert divergence_margins(model, prompt, ar, list(ar)) is None


def test_runner_up_token_gap_equals_ar_margin(exact_run):
    model, prompt, ar, logits = exact_run
    top2 = logits.topk(2).indices.tolist()
    assert top2[0] == ar[10]
    other = [*ar[:10], top2[1], *ar[11:]]
    divergence = divergence_margins(model, prompt, ar, other)
    assert (divergence.index, divergence.ar_token, divergence.other_token) == (10, ar[10], top2[1])
    expected = float(logits[top2[0]] - logits[top2[1]])
    assert divergence.ar_margin == pytest.approx(expected, rel=1e-5)
    assert divergence.other_margin == pytest.approx(expected, rel=1e-5)


def test_a_token_far_below_ars_exceeds_the_tolerance(exact_run):
    """The forced engine-error case: the worst token instead of AR's is no near-tie."""
    model, prompt, ar, logits = exact_run
    worst = int(logits.argmin())
    divergence = divergence_margins(model, prompt, ar, [*ar[:10], worst])
    assert divergence.other_margin == pytest.approx(float(logits[ar[10]] - logits[worst]), rel=1e-5)
    assert divergence.other_margin > divergence.ar_margin > 0
    assert divergence.exceeds(1.0) and not divergence.exceeds(divergence.other_margin)


def test_an_output_that_stops_early_has_no_margins(exact_run):
    model, prompt, ar, _ = exact_run
    divergence = divergence_margins(model, prompt, ar, ar[:5])
    assert divergence.index == 5 and divergence.other_token is None
    assert math.isnan(divergence.ar_margin) and not divergence.exceeds(0.0)


@pytest.mark.parametrize(("arch", "prompt_seed"), [("gemma3", 10), ("llama", 14)])
def test_bfloat16_mismatches_are_near_ties(arch, prompt_seed):
    """On a CPU in bfloat16 lookahead's wider steps round differently from AR's one-token steps.

    These (flat, init_scale 1) tiny models have near-ties where that flips the argmax: the output
    then differs from AR, and the margins there show a near-tie, far inside the default tolerance.
    """
    model = tiny_model(arch, init_scale=1.0, seed=7, dtype=torch.bfloat16)
    prompt = repetitive_prompt(30, seed=prompt_seed)
    ar = autoregressive_generate(model, prompt, 48).tokens
    lookahead = lookahead_generate(model, prompt, LookaheadParams(5, 7, 7), 48).tokens
    divergence = divergence_margins(model, prompt, ar, lookahead)
    assert divergence is not None, "expected a bfloat16 near-tie mismatch on this prompt"
    assert abs(divergence.ar_margin) < 0.05 and abs(divergence.other_margin) < 0.05
    assert not divergence.exceeds(1.0)
    # The same model in float64 decodes both ways identically.
    exact = model.to(torch.float64)
    assert lookahead_generate(exact, prompt, LookaheadParams(5, 7, 7), 48).tokens == (
        autoregressive_generate(exact, prompt, 48).tokens
    )
