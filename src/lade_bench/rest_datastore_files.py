"""Every file of a REST datastore checked before anything drafts from it (or any model loads).

A datastore (``lade_bench.rest_datastore``) is a folder of three files the drafter and the plan read:
``manifest.json``, ``tokens.npy`` and ``suffix_array.npy``. A damaged one (missing, truncated, another
dtype or shape, an empty store, a suffix array that is not the token stream's) would otherwise fail
after the model loads with a raw numpy message, or, worse, draft from a wrong array silently. Here each
is read and checked, and a bad one is refused in one line naming the datastore folder, the file, what is
wrong with it, and the command that rebuilds the datastore.

The checks also tie the files to the manifest's **content hash**, the datastore's part of a cell id:
the token ids are hashed again and compared with it, and the suffix array is checked to be *the* suffix
array of those ids (a permutation of their positions in sorted suffix order, verified in linear time
after Burkhardt and Kaerkkaeinen, "Fast Lightweight Suffix Array Construction and Checking", CPM 2003:
sorted by first token, ties broken by the ranks of the next suffixes). So the content hash covers
everything the drafter reads: two stores with the same hash draft alike. Older datastores also hold an
``ngrams.npy`` (word 13-grams of an earlier leak check); nothing reads it any more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from lade_bench.rest_datastore import (
    DATASTORES_DIR,
    MANIFEST_FILE,
    REFERENCE,
    SETTING,
    SUFFIX_ARRAY_FILE,
    TOKENS_FILE,
    DatastoreError,
    conf_model_name,
    content_hash,
    reference_build_command,
)

# The suffix array's integer types (libdivsufsort's int32, its int64 past 2**31 tokens).
SUFFIX_ARRAY_DTYPES = (np.dtype("<i4"), np.dtype("<i8"))
# The token ids' type: uint32, so vocabularies above 65,535 fit.
TOKENS_DTYPE = np.dtype("<u4")
# What a manifest must hold, with the type of each value.
MANIFEST_KEYS: dict[str, type] = {"tokenizer": str, "vocab_size": int, "tokens": int, "content_hash": str}


def rebuild_command(folder: Path, manifest: dict[str, Any] | None) -> str:
    """The command that rebuilds the datastore at ``folder``, from what its manifest records (if readable)."""
    manifest = manifest or {}
    tokenizer = manifest.get("tokenizer") if isinstance(manifest.get("tokenizer"), str) else None
    if folder.name == REFERENCE and folder.parent.parent.name == DATASTORES_DIR and tokenizer:
        return reference_build_command(tokenizer, folder.parent.parent.parent)
    model = conf_model_name(tokenizer) if tokenizer else "<model>"
    corpus = manifest.get("corpus") or []
    files = " ".join(str(c["path"]) for c in corpus if isinstance(c, dict) and "path" in c) or "FILE..."
    fields = "".join(f" --text-field {f}" for f in manifest.get("text_fields") or [] if f != "text")
    return f"python -m lade_bench.rest_datastore build --model {model} --corpus {files}{fields} --out {folder}"


def checked_files(folder: Path, manifest: dict[str, Any], setting: str = SETTING) -> tuple[np.ndarray, np.ndarray]:
    """The token ids and suffix array of the datastore at ``folder`` (memory-mapped), after checking every file.

    Args:
        folder: the datastore folder.
        manifest: its parsed ``manifest.json`` (``rest_datastore.read_manifest``).
        setting: the config key that named it, quoted in messages.

    Raises:
        DatastoreError: one line naming the folder, the bad file, what is wrong and the rebuild command:
            a manifest without its keys; ``tokens.npy`` missing, unreadable, not a 1-D uint32 array,
            empty, of another length than the manifest's, holding ids at or beyond its vocabulary size,
            or not the ids its content hash names; ``suffix_array.npy`` missing, unreadable, not a 1-D
            int32/int64 array as long as the tokens, or not their suffix array.
    """

    def refuse(file: str, problem: str) -> DatastoreError:
        return DatastoreError(
            f"{setting}={str(folder)!r}: {file} {problem}; rebuild the datastore with "
            f"{rebuild_command(folder, manifest)}"
        )

    for key, kind in MANIFEST_KEYS.items():
        value = manifest.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise refuse(MANIFEST_FILE, f"has no {kind.__name__} {key!r} (found {value!r:.60})")
    tokens = _array(folder / TOKENS_FILE, refuse)
    if tokens.dtype != TOKENS_DTYPE or tokens.ndim != 1:
        raise refuse(TOKENS_FILE, f"holds a {tokens.dtype} array of shape {tokens.shape}, not 1-D uint32 token ids")
    if tokens.shape[0] == 0:
        raise refuse(TOKENS_FILE, "holds no tokens (an empty datastore drafts nothing)")
    if tokens.shape[0] != manifest["tokens"]:
        raise refuse(TOKENS_FILE, f"holds {tokens.shape[0]} tokens where {MANIFEST_FILE} says {manifest['tokens']}")
    largest = int(tokens.max())
    if largest >= manifest["vocab_size"]:
        raise refuse(TOKENS_FILE, f"holds token id {largest}, beyond the vocabulary size {manifest['vocab_size']}")
    if content_hash(manifest["tokenizer"], tokens) != manifest["content_hash"]:
        raise refuse(TOKENS_FILE, f"is not the token ids {MANIFEST_FILE}'s content_hash names (changed since built)")
    suffix_array = _array(folder / SUFFIX_ARRAY_FILE, refuse)
    if suffix_array.dtype not in SUFFIX_ARRAY_DTYPES or suffix_array.shape != tokens.shape:
        raise refuse(
            SUFFIX_ARRAY_FILE,
            f"holds a {suffix_array.dtype} array of shape {suffix_array.shape}, not 1-D int32/int64 of the "
            f"tokens' shape {tokens.shape}",
        )
    problem = suffix_array_problem(tokens, suffix_array)
    if problem is not None:
        raise refuse(SUFFIX_ARRAY_FILE, problem)
    return tokens, suffix_array


def _array(file: Path, refuse: Any) -> np.ndarray:
    """``file``'s array, memory-mapped (no pickles); refused when missing or unreadable."""
    if not file.is_file():
        raise refuse(file.name, "is missing")
    try:
        return np.load(file, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:  # truncated, not .npy, pickled objects
        raise refuse(file.name, f"cannot be read as a numpy array ({str(err).splitlines()[0]})") from err


def suffix_array_problem(tokens: np.ndarray, suffix_array: np.ndarray) -> str | None:
    """What is wrong with ``suffix_array`` as the suffix array of ``tokens`` (sorted by id value); None: it is.

    Linear time and vectorised: every entry in ``[0, n)``, each position exactly once, and each pair of
    neighbours in order: the first tokens ascending, and where they are equal the suffixes after them
    ranked ascending (the empty suffix first). A permutation whose neighbours are all in order is the
    suffix array (Burkhardt and Kaerkkaeinen 2003).
    """
    n = int(tokens.shape[0])
    order = np.asarray(suffix_array, dtype=np.int64)
    low, high = int(order.min()), int(order.max())
    if low < 0 or high >= n:
        return f"has entry {low if low < 0 else high}, outside the token positions [0, {n})"
    rank = np.full(n + 1, -1, dtype=np.int64)  # rank[n]: the empty suffix, before every other
    rank[order] = np.arange(n, dtype=np.int64)
    if np.any(rank[:n] < 0):
        return "does not hold every token position once (not a permutation)"
    ids = np.asarray(tokens, dtype=np.int64)
    first, second = order[:-1], order[1:]
    before = (ids[first] < ids[second]) | ((ids[first] == ids[second]) & (rank[first + 1] < rank[second + 1]))
    if not np.all(before):
        at = int(np.argmin(before))
        return f"is not the suffixes in sorted order (rows {at} and {at + 1}): not these tokens' suffix array"
    return None
