"""The engine's model checks, the same for every decoding method that verifies drafted tokens.

Every such method (lookahead, Jacobi, prompt lookup, assisted generation, and any method registered
later with ``Method.model_checks``) runs :func:`check_model_support` before its first forward, and
the runner runs it once when it loads the model, so no method reaches a model the engine refuses
for another. The autoregressive reference arms are the model's own ``generate`` and run anything.
"""

from __future__ import annotations

import torch

from lade_bench.decoding.core.checks import check_custom_mask_support, check_model_structure
from lade_bench.decoding.model_checks.model_probe import check_model_behaviour


def check_model_support(model: torch.nn.Module, *, custom_mask: bool) -> None:
    """Raise UnsupportedModelError unless every decoding method is exact on ``model``.

    First what the model is (``checks.check_model_structure``: config and forward signature, no
    forward), then, for a method that feeds a custom 4D mask (``custom_mask``), whether its attention
    implementation takes one, then what the model does (``model_probe``: a few tiny forwards, once
    per model object, dtype and attention implementation).
    """
    if custom_mask:
        check_custom_mask_support(model)
    else:
        check_model_structure(model)
    check_model_behaviour(model)
