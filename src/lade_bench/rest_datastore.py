"""REST's datastore: a suffix array over the token ids of a local corpus, built once by a command.

REST (He, Zhong, Lee, Zhang, Liang, "REST: Retrieval-Based Speculative Decoding", NAACL 2024,
arXiv 2311.08252) drafts continuations of the context's longest suffix found in a datastore. The
authors' datastore (github.com/FasterDecoding/REST, ``datastore/get_datastore_{chat,code}.py`` and
``DraftRetriever/src/lib.rs``: ``Writer``) concatenates every document's token ids (no separator)
and sorts their suffixes with libsais; their writer stores ids as u16, which their README says to
patch for vocabularies above 65,535. Here the suffix array comes from ``pydivsufsort`` (libdivsufsort)
and the ids are stored as uint32, so Gemma-3's 262,144-token vocabulary fits.

A datastore is a folder (built atomically: written beside, then renamed into place):

* ``tokens.npy``: the corpus's token ids (uint32), documents concatenated in file order;
* ``suffix_array.npy``: their suffix array (int32, int64 past 2**31 tokens);
* ``manifest.json``: the tokenizer (``models.loading.tokenizer_source``), its vocabulary size, the
  token count, each corpus file with its sha256, and the content hash that names the datastore in a
  cell's id (``content_hash``: sha256 of the tokenizer and the ids; two datastores never share a cell).

Every file is checked whenever a datastore is read (``load_datastore``, through
``rest_datastore_files``): a damaged one is refused naming the file and the rebuild command, and the
suffix array is checked to be the ids' own, so the content hash covers all the drafter reads.

**Leak check.** A datastore drafts what it holds; one holding a benchmark's reference answers would
inflate that benchmark's acceptance and speed. ``rest_datastore_leak`` reads the token stream as the
drafter does (across record boundaries) and refuses a datastore holding any 16-token span of a cell's
benchmark text (docs/rest.md, "Leak check"); the plan asks it before any model loads (``methods/rest.py``).

Commands: ``python -m lade_bench.rest_datastore build --model smollm2 --corpus FILE... [--name NAME]``, or
``build --reference --model smollm2`` for the reference datastore (``REFERENCE``, what ``rest.datastore``
names by default; ``scripts/setup.sh`` builds it for the embedded models);
``... check --datastore PATH --datasets NAME[=FILE]... [--outputs PATH...]`` reports the leak check as JSON
(docs/rest.md). No torch import at the top: the plan reads manifests and checks leaks before loading.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Sequence
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
# JSONL records: the field read as a document's text unless --text-field says otherwise.
DEFAULT_TEXT_FIELD = "text"
# The word that names the reference datastore (``rest.datastore: reference``, the default): the one built
# from REFERENCE_CORPUS for the cell's tokenizer, in the model cache. Any other value is a folder.
REFERENCE = "reference"
# The reference corpus: the top-level modules (``*.py``) of the running interpreter's standard library, on
# every machine and offline, code and English prose, PSF licence; but configparser.py, which shares a
# 13-word span with ClassEval_18's solution (the leak check flags it; docs/rest.md).
REFERENCE_LEFT_OUT = ("configparser.py",)


class DatastoreError(ValueError):
    """A datastore that is missing, malformed, or built for another tokenizer; the message says how to build one."""


def build_command(tokenizer: str = "<model>") -> str:
    """How to build a datastore, for error messages (``<model>``: a ``conf/model`` name)."""
    model = tokenizer.split(":", 1)[1].split("@")[0] if tokenizer.startswith("embedded:") else "<model>"
    return f"python -m lade_bench.rest_datastore build --model {model} --corpus FILE... (docs/rest.md)"


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
    file checked first (``rest_datastore_files.checked_files``: the plan calls this before any model loads).

    Raises:
        DatastoreError: no datastore there, or a damaged file (one line: the folder, the file, what is
            wrong, the rebuild command).
    """
    from lade_bench.rest_datastore_files import checked_files

    folder = Path(path).expanduser()
    manifest = read_manifest(folder, setting)
    tokens, suffix_array = checked_files(folder, manifest, setting)
    return Datastore(folder, tokens, suffix_array, manifest)


def content_hash(tokenizer: str, tokens: np.ndarray) -> str:
    """A datastore's identity: the sha256 of its tokenizer's word and its token ids (little-endian uint32)."""
    digest = hashlib.sha256(tokenizer.encode() + b"\0")
    digest.update(np.ascontiguousarray(tokens, dtype="<u4").tobytes())
    return digest.hexdigest()


def reference_corpus() -> list[Path]:
    """The reference corpus's files: the standard library's top-level modules, found from this interpreter."""
    import sysconfig

    stdlib = Path(sysconfig.get_path("stdlib"))
    return sorted(p for p in stdlib.glob("*.py") if p.name not in REFERENCE_LEFT_OUT)


def reference_build_command(tokenizer: str, cache_dir: str | Path | None) -> str:
    """The command that builds the reference datastore for ``tokenizer`` in ``cache_dir``, for messages."""
    cache = f" --cache-dir {cache_dir}" if cache_dir is not None else ""
    return f"python -m lade_bench.rest_datastore build --reference --model {conf_model_name(tokenizer)}{cache}"


def conf_model_name(tokenizer: str) -> str:
    """A ``conf/model`` entry whose tokenizer is ``tokenizer`` (``<model>`` when none is)."""
    if tokenizer.startswith("embedded:"):
        return tokenizer.split(":", 1)[1]
    from lade_bench.conf import PACKAGE_CONF_DIR
    from lade_bench.models.loading import tokenizer_source

    entries = sorted(p.stem for p in (Path(PACKAGE_CONF_DIR) / "model").glob("*.yaml"))
    return next((name for name in entries if tokenizer_source(_model_config(name)) == tokenizer), "<model>")


def resolve_datastore(value: str, tokenizer: str, cache_dir: str | Path | None, setting: str = SETTING) -> str:
    """The datastore folder a ``rest.datastore`` value names: the word ``reference`` is the reference
    datastore built for ``tokenizer`` under the model cache ``cache_dir``; any other value (a folder) is
    returned as it is. The one place the word is read (also for SAM-Decoding's static corpus;
    ``setting``: the config key quoted in messages).

    Raises:
        DatastoreError: ``reference`` while the tokenizer or the cache is unknown, or that datastore is
            not built (the message gives the command that builds it).
    """
    if value != REFERENCE:
        return value
    if not tokenizer or cache_dir is None:
        raise DatastoreError(
            f"{setting}={REFERENCE!r} names the reference datastore of the cell's tokenizer in the model cache, "
            "but this caller knows neither; pass a datastore folder"
        )
    folder = datastore_folder(cache_dir, tokenizer, REFERENCE)
    if not (folder / MANIFEST_FILE).is_file():
        raise DatastoreError(
            f"{setting}={REFERENCE!r}: the reference datastore for {tokenizer} is not built (no {folder}); "
            f"build it with {reference_build_command(tokenizer, cache_dir)} (scripts/setup.sh does, for the "
            "embedded models)"
        )
    return str(folder)


def ensure_reference_datastore(
    model_name: str, cache_dir: str | Path, corpus: Sequence[Path] | None = None
) -> tuple[Path, bool]:
    """Build the reference datastore of ``conf/model`` entry ``model_name`` in ``cache_dir`` unless it is there.

    It is kept when its manifest matches: the same format, tokenizer and corpus files (paths and
    sha256), so a rerun costs a hash of the corpus, and another Python's standard library rebuilds it.
    ``corpus``: the files (None: :func:`reference_corpus`; tests give a small one).

    Returns:
        The datastore folder, and whether it was built now.
    """
    from lade_bench.models.loading import tokenizer_source

    model = _model_config(model_name)
    files = list(corpus if corpus is not None else reference_corpus())
    folder = datastore_folder(cache_dir, tokenizer_source(model), REFERENCE)
    wanted = [{"path": str(Path(f).expanduser().resolve()), "sha256": file_sha256(f)} for f in files]
    try:
        manifest = read_manifest(folder)
    except DatastoreError:
        manifest = {}
    if manifest.get("tokenizer") == tokenizer_source(model) and manifest.get("corpus") == wanted:
        return folder, False
    return build_from_files(model, files, folder, cache_dir=cache_dir), True


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


def datastore_refusal(
    path: str | Path,
    tokenizer: str,
    dataset: str,
    dataset_path: str | None,
    setting: str = SETTING,
    *,
    outputs: Sequence[str | Path] = (),
    cache_dir: str | Path | None = None,
) -> str | None:
    """Why a cell cannot draft from the datastore at ``path``, before any model loads; None: it can.

    Refused: no datastore there; a damaged file (``load_datastore`` checks every one); one built with
    another ``tokenizer`` than the cell's model's (checked when the cell knows it); or one holding text of
    the cell's ``dataset`` (its reference answers, or the prompts of samples without any) or of the
    model's own ``outputs`` (results folders or JSONL files), by the token leak check
    (``rest_datastore_leak``, the tokenizer read from the model cache ``cache_dir``). ``setting`` is the
    config key that named it (REST's ``rest.datastore``, SAM-Decoding's ``sam_decoding.static_datastore``),
    quoted in the message.
    """
    from lade_bench.rest_datastore_leak import leak_refusal

    try:
        datastore = load_datastore(path, setting)
        if tokenizer:
            check_tokenizer(path, tokenizer, setting)
    except DatastoreError as err:
        return str(err)
    if not dataset and not outputs:
        return None
    return leak_refusal(datastore, setting, dataset, dataset_path, outputs, cache_dir)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``build`` a datastore for a model's tokenizer from local JSONL or text files; ``check`` it."""
    parser = argparse.ArgumentParser(prog="python -m lade_bench.rest_datastore", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="tokenize files and write a datastore beside the model cache")
    build.add_argument(
        "--model", default="smollm2", help="a conf/model entry whose tokenizer is used (default smollm2)"
    )
    source = build.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", nargs="+", help="JSONL (one document per record) or plain-text files")
    source.add_argument(
        "--reference",
        action="store_true",
        help=f"the reference datastore ({REFERENCE!r}: the standard library's modules but "
        f"{', '.join(REFERENCE_LEFT_OUT)}), kept when already built from the same files",
    )
    build.add_argument(
        "--text-field",
        action="append",
        default=None,
        help=f"JSONL field(s) holding text (default {DEFAULT_TEXT_FIELD!r})",
    )
    build.add_argument("--name", default="default", help="the datastore's folder name (default 'default')")
    build.add_argument(
        "--cache-dir", default="~/.cache/lade_bench", help="the model cache (the runner's model_cache_dir)"
    )
    build.add_argument("--out", default=None, help="the datastore folder (default: <cache-dir>/rest_datastores/...)")
    check = commands.add_parser(
        "check",
        help="check a datastore's files and its leak check against datasets and outputs (JSON; exit 1: refused)",
    )
    check.add_argument("--datastore", required=True, help="the datastore folder")
    check.add_argument("--datasets", nargs="*", default=[], help="registered datasets, NAME or NAME=FILE")
    check.add_argument(
        "--outputs",
        nargs="*",
        default=[],
        help="the model's own outputs: results folders (a finished cell's rows) or JSONL files (output_text or text)",
    )
    check.add_argument(
        "--cache-dir", default="~/.cache/lade_bench", help="the model cache, where the datastore's tokenizer is read"
    )
    check.add_argument("--output", default=None, help="write the JSON report there (default: print it)")
    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(parser, args)
    if args.reference:
        if args.out is not None or args.name != "default" or args.text_field:
            parser.error(
                "--reference builds the datastore named 'reference' in --cache-dir: drop --out, --name, --text-field"
            )
        folder, built = ensure_reference_datastore(args.model, args.cache_dir)
        manifest = read_manifest(folder)
        done = "built" if built else "already built from the same files, kept"
        print(
            f"reference datastore for {manifest['tokenizer']}: {manifest['tokens']} tokens, {done}: {folder}",
            flush=True,
        )
        return 0
    model = _model_config(args.model)
    from lade_bench.models.loading import tokenizer_source

    out = args.out or datastore_folder(args.cache_dir, tokenizer_source(model), args.name)
    fields = tuple(args.text_field or (DEFAULT_TEXT_FIELD,))
    folder = build_from_files(model, args.corpus, out, text_fields=fields, cache_dir=args.cache_dir)
    manifest = read_manifest(folder)
    print(f"{manifest['tokens']} tokens from {len(args.corpus)} file(s) -> {folder}", flush=True)
    print(f"use it with: rest.datastore={folder}", flush=True)
    return 0


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The ``check`` command: the report as JSON (stdout or ``--output``); exit 1 when the datastore is
    damaged (one line on stderr) or any text leaks (the refusal on stderr too)."""
    import sys

    from lade_bench.rest_datastore_leak import leak_report

    if not args.datasets and not args.outputs:
        parser.error("check: give --datasets, --outputs or both")
    try:
        report = leak_report(args.datastore, args.datasets, args.outputs, args.cache_dir)
    except DatastoreError as err:
        print(f"refused: {err}", file=sys.stderr)
        return 1
    text = json.dumps(report, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text, end="")
    if report["refused"]:
        print(f"refused: {report['refused']}", file=sys.stderr)
        return 1
    return 0


def _model_config(name: str) -> Any:
    """The ``conf/model/<name>.yaml`` entry (what ``model=<name>`` composes)."""
    from omegaconf import OmegaConf

    from lade_bench.conf import PACKAGE_CONF_DIR

    file = Path(PACKAGE_CONF_DIR) / "model" / f"{name}.yaml"
    if not file.is_file():
        known = sorted(p.stem for p in (Path(PACKAGE_CONF_DIR) / "model").glob("*.yaml"))
        raise SystemExit(f"--model {name!r} is not a conf/model entry; use one of {known}")
    model = OmegaConf.load(file)
    defaults = {"embedded": None, "revision": None, "trust_remote_code": False, "name_or_path": None}
    return OmegaConf.merge(defaults, model)


if __name__ == "__main__":
    raise SystemExit(main())
