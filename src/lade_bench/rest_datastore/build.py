"""Building a REST datastore: a local corpus tokenized, its suffix array sorted, the folder written atomically.

REST (He, Zhong, Lee, Zhang, Liang, "REST: Retrieval-Based Speculative Decoding", NAACL 2024,
arXiv 2311.08252) drafts continuations of the context's longest suffix found in a datastore. The
authors' datastore (github.com/FasterDecoding/REST, ``datastore/get_datastore_{chat,code}.py`` and
``DraftRetriever/src/lib.rs``: ``Writer``) concatenates every document's token ids (no separator)
and sorts their suffixes with libsais; their writer stores ids as u16, which their README says to
patch for vocabularies above 65,535. Here the suffix array comes from ``pydivsufsort`` (libdivsufsort)
and the ids are stored as uint32, so Gemma-3's 262,144-token vocabulary fits. The files written are
the format ``rest_datastore.reader`` reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lade_bench.rest_datastore.reader import (
    DATASTORES_DIR,
    FORMAT_VERSION,
    MANIFEST_FILE,
    SUFFIX_ARRAY_FILE,
    TOKENS_FILE,
    DatastoreError,
    content_hash,
)

# JSONL records: the field read as a document's text unless --text-field says otherwise.
DEFAULT_TEXT_FIELD = "text"


def datastore_folder(cache_dir: str | Path, tokenizer: str, name: str) -> Path:
    """Where the command puts datastore ``name`` for ``tokenizer``: beside the models, one folder per tokenizer."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", tokenizer)
    return Path(cache_dir).expanduser() / DATASTORES_DIR / slug / name


def corpus_documents(files: Sequence[str | Path], text_fields: Sequence[str] = (DEFAULT_TEXT_FIELD,)) -> Iterator[str]:
    """The documents of ``files``: each JSONL record's ``text_fields`` (a ``.jsonl`` file), else the whole file.

    Raises:
        DatastoreError: a missing file, a bad JSON line, or a record without any of ``text_fields``.
    """
    for name in files:
        file = Path(name).expanduser()
        if not file.is_file():
            raise DatastoreError(f"corpus file {str(name)!r} does not exist")
        if file.suffix != ".jsonl":
            yield file.read_text(encoding="utf-8", errors="replace")
            continue
        with file.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise DatastoreError(f"{file}:{number}: not JSON ({err})") from err
                texts = [record[f] for f in text_fields if isinstance(record.get(f), str)]
                if not texts:
                    raise DatastoreError(
                        f"{file}:{number}: no text field {list(text_fields)}; its keys are {sorted(record)} "
                        "(pick the field with --text-field)"
                    )
                yield from texts


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).expanduser().open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def suffix_array_of(tokens: np.ndarray) -> np.ndarray:
    """The suffix array of ``tokens`` (uint32 ids), sorted by token, not by byte (libdivsufsort via pydivsufsort)."""
    from pydivsufsort import divsufsort

    if tokens.shape[0] == 0:
        return np.zeros(0, dtype=np.int32)
    # pydivsufsort sorts multi-byte symbols as big-endian bytes, i.e. by their integer value.
    return np.asarray(divsufsort(np.ascontiguousarray(tokens, dtype=np.uint32)))


def write_datastore(
    out: str | Path,
    documents: Iterable[Sequence[int]],
    *,
    tokenizer: str,
    vocab_size: int,
    corpus: Sequence[dict[str, Any]] = (),
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a datastore of the token-id ``documents`` at ``out``, atomically (a half-written one never shows).

    Args:
        out: the datastore folder (replaced when it exists).
        documents: each document's token ids, concatenated in order.
        tokenizer: the tokenizer's word (``models.loading.tokenizer_source``).
        vocab_size: the tokenizer's vocabulary size; every id must be below it.
        corpus: what the manifest records of each source file (path, sha256, ...).
        extra: more manifest keys.

    Returns:
        ``out``.

    Raises:
        DatastoreError: no tokens, or an id outside ``[0, vocab_size)``.
    """
    pieces = [np.asarray(list(d), dtype=np.int64) for d in documents]
    joined = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    if joined.size == 0:
        raise DatastoreError("the corpus has no tokens: give files with text in them")
    if joined.min() < 0 or joined.max() >= vocab_size:
        raise DatastoreError(
            f"token ids span [{joined.min()}, {joined.max()}], outside the vocabulary [0, {vocab_size})"
        )
    tokens = joined.astype(np.uint32)
    digest = content_hash(tokenizer, tokens)
    manifest = {
        "format_version": FORMAT_VERSION,
        "tokenizer": tokenizer,
        "vocab_size": int(vocab_size),
        "tokens": int(tokens.shape[0]),
        "documents": len(pieces),
        "content_hash": digest,
        "corpus": list(corpus),
        **(extra or {}),
    }
    target = Path(out).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.parent / f".{target.name}.partial-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    np.save(scratch / TOKENS_FILE, tokens)
    np.save(scratch / SUFFIX_ARRAY_FILE, suffix_array_of(tokens))
    (scratch / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    if target.exists():
        target.rename(old)
    scratch.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def build_from_files(
    model: Any,
    files: Sequence[str | Path],
    out: str | Path,
    *,
    text_fields: Sequence[str] = (DEFAULT_TEXT_FIELD,),
    cache_dir: str | Path | None = None,
) -> Path:
    """Tokenize ``files`` with ``model``'s tokenizer (a model config) and write the datastore at ``out``."""
    from lade_bench.models.loading import load_tokenizer, tokenizer_source

    tokenizer = load_tokenizer(model, cache_dir=cache_dir)
    texts = list(corpus_documents(files, text_fields))
    documents = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    corpus = [{"path": str(Path(f).expanduser().resolve()), "sha256": file_sha256(f)} for f in files]
    return write_datastore(
        out,
        documents,
        tokenizer=tokenizer_source(model),
        vocab_size=len(tokenizer),
        corpus=corpus,
        extra={"text_fields": list(text_fields)},
    )
