"""Stable identity of a cell: a hash of its *semantic* config.

Semantic keys are the ones that change what a row means; the caller passes only those, e.g.::

    model (id or path, and revision/dtype if they vary), dataset (name, split, sample selection,
    max samples), max_new_tokens, arms, repeats, the lookahead shape (ngram, window, guesses,
    prompt_as_reference), the sampling params (do_sample, temperature, top_p, top_k), seed.

Not semantic, so never passed: the sweep name (the same cell in two sweeps is the same experiment;
``sweep`` is its own column), output paths, W&B mode, logging, launcher settings. The device is
recorded in the manifest rather than the id; include it only if one sweep folder mixes devices.

The hash is sha256 of canonical JSON: sorted keys, no whitespace, tuples as lists. Numbers are
canonicalised so that the id does not depend on how a YAML file happened to spell them: an integral
float is written as an int (``temperature: 1`` and ``temperature: 1.0`` are the same cell) and other
floats use ``repr`` (shortest round-trip form, identical on every platform since Python 3.1).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

CELL_ID_LENGTH = 16  # hex chars = 64 bits: collision-free for any realistic number of cells


def cell_id(semantic_config: Mapping[str, Any]) -> str:
    """Return the 16-hex-char id of a cell from its semantic config.

    Key order, int-vs-integral-float spelling and tuple-vs-list do not change the id; any changed
    value does.

    Args:
        semantic_config: only the semantic keys (see the module docstring); nested mappings and
            sequences are allowed, leaves must be str, bool, None or finite numbers.

    Raises:
        ValueError: a non-string key, a NaN/inf, or a value that has no canonical JSON form.
    """
    if not isinstance(semantic_config, Mapping):
        raise ValueError(f"semantic_config must be a mapping, got {type(semantic_config).__name__}")
    text = canonical_json(semantic_config)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:CELL_ID_LENGTH]


def canonical_json(value: Any) -> str:
    """Canonical JSON text of ``value`` (the exact bytes that :func:`cell_id` hashes)."""
    return json.dumps(
        _canonical(value, "$"), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _canonical(value: Any, path: str) -> Any:
    if value is None or isinstance(value, str):
        return value
    # bool before numbers: bool is an int subclass, and True must not hash like 1.
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise ValueError(f"{path}: {f!r} has no stable JSON form; a semantic config must be finite")
        return int(f) if f.is_integer() else f
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{path}: key {key!r} is not a string")
            out[key] = _canonical(item, f"{path}.{key}")
        return out
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [_canonical(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise ValueError(f"{path}: {type(value).__name__} {value!r} has no canonical JSON form")
