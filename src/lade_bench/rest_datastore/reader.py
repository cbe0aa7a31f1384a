"""What the engine reads of a REST datastore: the format, and every file checked on the way in.

A datastore is a folder of three files (the package's docstring says how one is built):

* ``tokens.npy``: the corpus's token ids (uint32), documents concatenated in file order;
* ``suffix_array.npy``: their suffix array (int32, int64 past 2**31 tokens);
* ``manifest.json``: the tokenizer (``model_config.tokenizer_source``), its vocabulary size, the token
  count, each corpus file with its sha256, and the content hash that names the datastore in a cell's id
  (:func:`content_hash`: sha256 of the tokenizer and the ids; two datastores never share a cell).

Every file is checked whenever a datastore is read (:func:`load_datastore`): a damaged one (missing,
truncated, another dtype or shape, an empty store, a suffix array that is not the token stream's) would
otherwise fail after the model loads with a raw numpy message, or, worse, draft from a wrong array
silently. It is refused in one line naming the datastore folder, the file, what is wrong with it, and
the command that rebuilds the datastore.

The checks also tie the files to the manifest's content hash: the token ids are hashed again and
compared with it, and the suffix array is checked to be *the* suffix array of those ids (a permutation
of their positions in sorted suffix order, verified in linear time after Burkhardt and Kaerkkaeinen,
"Fast Lightweight Suffix Array Construction and Checking", CPM 2003: sorted by first token, ties broken
by the ranks of the next suffixes). So the content hash covers everything the drafter reads: two stores
with the same hash draft alike. Older datastores also hold an ``ngrams.npy`` (word 13-grams of an
earlier leak check); nothing reads it any more.

The engine (``decoding/drafters/rest.py``, ``sam_decoding.py``) imports this module and no other of the
package, so nothing here imports a ``lade_bench`` module at module level (``tests/test_layout.py``); only
the rebuild command in a message looks up the ``conf/model`` entry of a Hugging Face tokenizer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FORMAT_VERSION = 1
TOKENS_FILE = "tokens.npy"
SUFFIX_ARRAY_FILE = "suffix_array.npy"
MANIFEST_FILE = "manifest.json"
# Beside the converted models (``model_cache_dir``), one folder per tokenizer.
DATASTORES_DIR = "rest_datastores"
# The setting that names a datastore in messages, unless a caller names its own (SAM-Decoding's static corpus).
SETTING = "rest.datastore"
# The word that names the reference datastore (``rest.datastore: reference``, the default): the one built
# from the reference corpus for the cell's tokenizer, in the model cache (``rest_datastore.reference``
# resolves it). Any other value is a folder.
REFERENCE = "reference"
# The suffix array's integer types (libdivsufsort's int32, its int64 past 2**31 tokens).
SUFFIX_ARRAY_DTYPES = (np.dtype("<i4"), np.dtype("<i8"))
# The token ids' type: uint32, so vocabularies above 65,535 fit.
TOKENS_DTYPE = np.dtype("<u4")
# What a manifest must hold, with the type of each value.
MANIFEST_KEYS: dict[str, type] = {"tokenizer": str, "vocab_size": int, "tokens": int, "content_hash": str}


class DatastoreError(ValueError):
    """A datastore that is missing, malformed, or built for another tokenizer; the message says how to build one."""


def build_command(tokenizer: str = "<model>") -> str:
    """How to build a datastore, for error messages (``<model>``: a ``conf/model`` name)."""
    model = tokenizer.split(":", 1)[1].split("@")[0] if tokenizer.startswith("embedded:") else "<model>"
    return f"python -m lade_bench.rest_datastore build --model {model} --corpus FILE... (docs/rest.md)"


def reference_build_command(tokenizer: str, cache_dir: str | Path | None) -> str:
    """The command that builds the reference datastore for ``tokenizer`` in ``cache_dir``, for messages."""
    cache = f" --cache-dir {cache_dir}" if cache_dir is not None else ""
    return f"python -m lade_bench.rest_datastore build --reference --model {conf_model_name(tokenizer)}{cache}"


def unresolved_reference(setting: str = SETTING) -> DatastoreError:
    """The error for the word :data:`REFERENCE` where the caller knows neither the tokenizer nor the model
    cache (the engine: ``Method.resolve`` turns the word into a folder before a cell runs)."""
    return DatastoreError(
        f"{setting}={REFERENCE!r} names the reference datastore of the cell's tokenizer in the model cache, "
        "but this caller knows neither; pass a datastore folder"
    )


def conf_model_name(tokenizer: str) -> str:
    """A ``conf/model`` entry whose tokenizer is ``tokenizer`` (``<model>`` when none is)."""
    if tokenizer.startswith("embedded:"):
        return tokenizer.split(":", 1)[1]
    # Function-level: the config folder and the tokenizer word are leaf modules, read only for a message.
    from lade_bench.conf import PACKAGE_CONF_DIR
    from lade_bench.model_config import tokenizer_source

    entries = sorted(p.stem for p in (Path(PACKAGE_CONF_DIR) / "model").glob("*.yaml"))
    return next((name for name in entries if tokenizer_source(conf_model(name)) == tokenizer), "<model>")


def conf_model(name: str) -> Any:
    """The ``conf/model/<name>.yaml`` entry (what ``model=<name>`` composes).

    Raises:
        SystemExit: no such entry (the message lists those there: the command line's ``--model``).
    """
    from omegaconf import OmegaConf

    from lade_bench.conf import PACKAGE_CONF_DIR

    file = Path(PACKAGE_CONF_DIR) / "model" / f"{name}.yaml"
    if not file.is_file():
        known = sorted(p.stem for p in (Path(PACKAGE_CONF_DIR) / "model").glob("*.yaml"))
        raise SystemExit(f"--model {name!r} is not a conf/model entry; use one of {known}")
    model = OmegaConf.load(file)
    defaults = {"embedded": None, "revision": None, "trust_remote_code": False, "name_or_path": None}
    return OmegaConf.merge(defaults, model)


@dataclass(frozen=True)
class Datastore:
    """A loaded datastore: token ids, their suffix array, and the manifest.

    Attributes:
        path: its folder.
        tokens: the concatenated token ids (uint32).
        suffix_array: start positions of the suffixes of ``tokens`` in sorted order.
        manifest: the parsed ``manifest.json``.
    """

    path: Path
    tokens: np.ndarray
    suffix_array: np.ndarray
    manifest: dict[str, Any]

    @property
    def content_hash(self) -> str:
        """The datastore's identity (sha256 of its tokenizer and token ids)."""
        return str(self.manifest["content_hash"])

    def size(self) -> int:
        """Tokens held (the warm-state protocol's size; a static datastore never grows)."""
        return int(self.tokens.shape[0])


def read_manifest(path: str | Path, setting: str = SETTING) -> dict[str, Any]:
    """The manifest of the datastore at ``path`` (``setting``: the config key named in messages).

    Raises:
        DatastoreError: no datastore there (the message says how to build one), or a bad manifest.
    """
    folder = Path(path).expanduser()
    manifest_file = folder / MANIFEST_FILE
    if not manifest_file.is_file():
        raise DatastoreError(
            f"{setting}={str(path)!r}: no REST datastore at {folder}; build one with {build_command()}"
        )
    try:
        manifest = json.loads(manifest_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatastoreError(f"{setting}={str(path)!r}: {manifest_file} is not JSON ({err}); rebuild it") from err
    if not isinstance(manifest, dict):
        raise DatastoreError(f"{setting}={str(path)!r}: {manifest_file} is not a JSON object; rebuild it")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise DatastoreError(
            f"{setting}={str(path)!r}: format_version {manifest.get('format_version')!r} is not "
            f"{FORMAT_VERSION}; rebuild it with {build_command()}"
        )
    return dict(manifest)


def check_tokenizer(path: str | Path, tokenizer: str, setting: str = SETTING) -> dict[str, Any]:
    """The manifest at ``path``, after checking that it was built with ``tokenizer`` (``setting``: as in messages).

    Raises:
        DatastoreError: missing datastore, or one built with another tokenizer (its token ids would
            mean other words to this model).
    """
    manifest = read_manifest(path, setting)
    if manifest["tokenizer"] != tokenizer:
        raise DatastoreError(
            f"{setting}={str(path)!r} was built with the tokenizer {manifest['tokenizer']!r}, but this "
            f"cell's model uses {tokenizer!r}; build one for it with {build_command(tokenizer)}"
        )
    return manifest


def load_datastore(path: str | Path, setting: str = SETTING) -> Datastore:
    """Load the datastore at ``path`` (token ids and suffix array memory-mapped: nothing is copied), every
    file checked first (:func:`checked_files`: the plan calls this before any model loads).

    Raises:
        DatastoreError: no datastore there, or a damaged file (one line: the folder, the file, what is
            wrong, the rebuild command).
    """
    folder = Path(path).expanduser()
    manifest = read_manifest(folder, setting)
    tokens, suffix_array = checked_files(folder, manifest, setting)
    return Datastore(folder, tokens, suffix_array, manifest)


def content_hash(tokenizer: str, tokens: np.ndarray) -> str:
    """A datastore's identity: the sha256 of its tokenizer's word and its token ids (little-endian uint32)."""
    digest = hashlib.sha256(tokenizer.encode() + b"\0")
    digest.update(np.ascontiguousarray(tokens, dtype="<u4").tobytes())
    return digest.hexdigest()


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
        manifest: its parsed ``manifest.json`` (:func:`read_manifest`).
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
