"""REST's leak check, on tokens as the drafter reads them: a datastore holding a benchmark's text is refused.

A datastore drafts what it holds. One holding a benchmark's reference answers (or the model's own
outputs on its questions) drafts the text it is scored on, and inflates acceptance and speed. The
drafter reads the datastore as one token stream (every record's ids concatenated, no separator) and
matches the context's last tokens anywhere in it, across record boundaries. So the check reads it the
same way: every window of :data:`LEAK_SPAN` tokens of the whole stream is hashed (64-bit, vectorised),
and a benchmark text leaks when one of its own windows is among them. Cutting the answers into short
records, or putting other records between the pieces, does not hide them: the windows inside each
piece remain, and so do those across a cut.

The rule, stated once here (docs/rest.md, "Leak check"):

* **Tokens, whitespace aside.** Both sides are tokenized with the datastore's tokenizer (the model's)
  and compared modulo whitespace: a token that is a word after a space or newline counts as the bare
  word (its id folded to the bare word's, where the vocabulary has it), and tokens of whitespace alone
  (newlines, indentation) are dropped. A record cut before a word tokenizes it without its space, and
  pieces rejoined with other whitespace tokenize their line breaks otherwise: neither hides a window.
* **Span.** :data:`LEAK_SPAN` (16) such tokens, REST's ``max_token_span``: the longest context suffix
  the drafter looks up. A text shorter than that is checked whole when it has at least
  :data:`MIN_SPAN` (8) tokens (a 10-token Spec-Bench translation reference held verbatim leaks); a
  shorter one (a RAG answer "1945") cannot be told from common text and is not checked. A window
  without a word (a token holding a letter) does not count either: runs of numbers and punctuation
  ("1, 2, 3, 4, ...", "0.3333333333") fill any test table.
* **Texts checked.** Each sample's reference answers: ``Sample.reference`` and the strings of its
  payload that are not part of its prompt (GSM8K's worked answer, MBPP's and HumanEval's code and
  tests, XSum's summary, ClassEval's solution and tests, Spec-Bench's references of every category,
  MT-Bench's judge references). The prompt shown to the model is not an answer, except where a sample
  has nothing else to check: a sample of an unscored dataset (MT-Bench), or one without a reference
  long enough to check (Spec-Bench's qa, its RAG questions and unreferenced MT-Bench questions), is
  checked by its turns too, so a datastore holding the benchmark's own prompts is refused. And, where
  given, the model's own outputs (a finished cell's rows, or a JSONL file of them: ``rest.leak_outputs``,
  the check command's ``--outputs``).

The datastore is read through ``rest_datastore.reader.load_datastore`` (every file checked, the content hash
recomputed from ``tokens.npy``): nothing derived from the corpus text is trusted.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lade_bench.rest_datastore.reader import SETTING, Datastore, DatastoreError, load_datastore

# The window the check matches: REST's max_token_span default (decoding/drafters/rest.py), the longest context
# suffix the drafter looks up; a datastore holding one of a text's 16-token windows can draft it.
LEAK_SPAN = 16
# A text shorter than LEAK_SPAN is matched whole when it has at least this many tokens; below, a span
# occurs in ordinary text by chance (a short answer, a number) and proves nothing.
MIN_SPAN = 8
# The rolling hash's base: FNV-1a's 64-bit prime (odd, so the hash mixes every position).
_BASE = np.uint64(0x100000001B3)
# How tokenizers write whitespace in their vocabulary: byte-level BPE (GPT-2, SmolLM2) writes space,
# newline and tab as these letters, SentencePiece (Gemma) a space as U+2581.
_WHITESPACE_MARKS = "\u0120\u010a\u0109\u2581"
# A letter (a word character that is neither a digit nor "_").
_LETTER = re.compile(r"[^\W\d_]")
# The JSONL fields an outputs file's records carry their text in (a row's, or a corpus's).
OUTPUT_FIELDS = ("output_text", "text")


@dataclass(frozen=True)
class TokenClasses:
    """What the check needs of a tokenizer's vocabulary, one entry per token id.

    Attributes:
        folded: the id a token counts as (a word after whitespace: the bare word's id, where there is one).
        space: the token is whitespace alone (dropped).
        word: the token holds a letter (a window needs one to count).
    """

    folded: np.ndarray
    space: np.ndarray
    word: np.ndarray

    def normalized(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """``ids`` as the check compares them: whitespace tokens dropped, the others folded (int64)."""
        ids = np.asarray(ids, dtype=np.int64)
        return self.folded[ids[~self.space[ids]]]


@dataclass(frozen=True)
class Checked:
    """One item checked against a datastore (a sample's answers or prompts, or one model output).

    Attributes:
        label: a sample id, or where an output came from (``file:line``, ``cell:sample:arm``).
        kind: ``answers``, ``prompts`` (a sample checked by its turns) or ``outputs``.
        lengths: each window's length in tokens (LEAK_SPAN, or a short text's own).
        hashes: each window's hash (empty: nothing long enough to check).
    """

    label: str
    kind: str
    lengths: np.ndarray
    hashes: np.ndarray


@functools.lru_cache(maxsize=2)
def reader_of(tokenizer: str, cache_dir: str | None) -> tuple[Any, TokenClasses]:
    """The tokenizer a ``tokenizer_source`` word names and its :class:`TokenClasses`, kept for the process
    (as ``metrics/rouge`` keeps its scorer): a sweep plans many cells of one tokenizer, and loading it
    (Gemma-3's 262,144 pieces) and classing its vocabulary cost seconds each time."""
    loaded = load_tokenizer_of(tokenizer, cache_dir)
    return loaded, token_classes(loaded)


def load_tokenizer_of(tokenizer: str, cache_dir: str | Path | None) -> Any:
    """The tokenizer a ``models.loading.tokenizer_source`` word names (no weights), from the model cache."""
    from omegaconf import OmegaConf

    from lade_bench.models.loading import load_tokenizer

    kind, _, rest = tokenizer.partition(":")
    model: dict[str, Any]
    if kind == "embedded":
        model = {"source": "embedded", "embedded": rest}
    elif kind == "hf":
        name, _, revision = rest.rpartition("@")
        model = {"source": "hf", "name_or_path": name, "revision": revision, "trust_remote_code": False}
    else:
        raise DatastoreError(f"tokenizer {tokenizer!r} is neither 'embedded:<name>' nor 'hf:<name>@<revision>'")
    return load_tokenizer(OmegaConf.create(model), cache_dir=cache_dir)


def token_classes(tokenizer: Any) -> TokenClasses:
    """The :class:`TokenClasses` of ``tokenizer``'s vocabulary (its pieces as the vocabulary writes them)."""
    vocab = tokenizer.get_vocab()
    size = max(len(tokenizer), max(vocab.values()) + 1)
    folded = np.arange(size, dtype=np.int64)
    space = np.zeros(size, dtype=bool)
    word = np.zeros(size, dtype=bool)
    for piece, index in vocab.items():
        bare = piece.lstrip(_WHITESPACE_MARKS)
        text = bare.strip(_WHITESPACE_MARKS)
        space[index] = not text.strip()
        word[index] = _LETTER.search(text) is not None
        if bare and bare != piece and bare in vocab:
            folded[index] = vocab[bare]
    return TokenClasses(folded, space, word)


def window_hashes(ids: np.ndarray, length: int) -> np.ndarray:
    """The rolling hashes (uint64) of every ``length``-token window of ``ids`` (normalized ids)."""
    values = np.asarray(ids, dtype=np.uint64)
    count = values.shape[0] - length + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    hashes = np.zeros(count, dtype=np.uint64)
    for offset in range(length):  # sum_j ids[i + j] * base**(length - 1 - j), wrapping mod 2**64
        hashes = hashes * _BASE + values[offset : offset + count]
    return hashes


def text_windows(ids: Sequence[int], classes: TokenClasses) -> tuple[int, np.ndarray]:
    """A text's windows: ``(length, hashes)`` of every LEAK_SPAN window holding a word, or of the whole
    text when it has MIN_SPAN to LEAK_SPAN - 1 tokens; no hashes when it is shorter."""
    tokens = classes.normalized(ids)
    length = min(LEAK_SPAN, tokens.shape[0])
    if length < MIN_SPAN:
        return length, np.zeros(0, dtype=np.uint64)
    words = np.concatenate([[0], np.cumsum(classes.word[tokens])])
    return length, window_hashes(tokens, length)[(words[length:] - words[:-length]) > 0]


def checked(label: str, kind: str, texts: Sequence[Sequence[int]], classes: TokenClasses) -> Checked:
    """The item ``label`` of ``kind`` whose texts' token ids are ``texts``: all their windows."""
    windows = [text_windows(ids, classes) for ids in texts]
    hashes = [h for _, h in windows]
    lengths = [np.full(h.shape[0], n, dtype=np.int64) for n, h in windows]
    return Checked(
        label,
        kind,
        np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64),
        np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.uint64),
    )


def leaking(datastore: Datastore, items: Sequence[Checked], classes: TokenClasses) -> list[Checked]:
    """The ``items`` one of whose windows occurs anywhere in the datastore's token stream (normalized)."""
    lengths = np.concatenate([i.lengths for i in items]) if items else np.zeros(0, dtype=np.int64)
    hashes = np.concatenate([i.hashes for i in items]) if items else np.zeros(0, dtype=np.uint64)
    if hashes.size == 0:
        return []
    stream = classes.normalized(datastore.tokens).astype(np.uint64)
    found = np.zeros(hashes.shape[0], dtype=bool)
    windows = np.zeros(stream.shape[0], dtype=np.uint64)
    for length in range(1, int(lengths.max()) + 1):  # the stream's windows grow one token per pass
        windows = windows[: max(stream.shape[0] - length + 1, 0)] * _BASE + stream[length - 1 :]
        wanted = lengths == length
        if wanted.any():
            spans = np.unique(hashes[wanted])
            # The stream's windows that are spans (a sort of both), then which of the spans they are.
            found[wanted] = np.isin(hashes[wanted], windows[np.isin(windows, spans)])
    leaked, at = [], 0
    for item in items:
        if found[at : at + item.hashes.shape[0]].any():
            leaked.append(item)
        at += item.hashes.shape[0]
    return leaked


def sample_items(samples: Sequence[Any], scored: bool, tokenizer: Any, classes: TokenClasses) -> list[Checked]:
    """Each sample's checked items: its reference answers (``answers``); and its turns (``prompts``) when the
    dataset is not ``scored`` or no answer of the sample is long enough to check, so that every sample with
    text to check is checked by something."""
    answers = [reference_texts(s) for s in samples]
    encoded = iter(_encode([t for texts in answers for t in texts], tokenizer))
    items = [
        checked(str(s.sample_id), "answers", [next(encoded) for _ in texts], classes)
        for s, texts in zip(samples, answers, strict=True)
    ]
    due = [not scored or item.hashes.size == 0 for item in items]
    # Only the turns checked are tokenized (a summarization article is long, and not an answer).
    turns = iter(_encode([t for s, d in zip(samples, due, strict=True) if d for t in s.turns], tokenizer))
    for sample, d in zip(samples, due, strict=True):
        if d:
            items.append(checked(str(sample.sample_id), "prompts", [next(turns) for _ in sample.turns], classes))
    return items


def _encode(texts: Sequence[str], tokenizer: Any) -> list[list[int]]:
    """Token ids of ``texts`` as the datastore's build tokenizes a document (no special tokens)."""
    if not texts:
        return []
    return list(tokenizer(list(texts), add_special_tokens=False)["input_ids"])


def reference_texts(sample: Any) -> list[str]:
    """What a sample's answer is scored against: its reference and the payload strings not shown in its prompt."""
    prompt = "\n".join(sample.turns) + "\n" + (sample.completion_prefix or "")
    texts = [sample.reference] if isinstance(sample.reference, str) else []

    def strings(value: Any) -> Any:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                yield from strings(item)

    texts += [s for s in strings(sample.payload) if s.strip() and s.strip() not in prompt]
    return texts


def output_texts(sources: Sequence[str | Path]) -> list[tuple[str, str]]:
    """``(label, text)`` of the model outputs in ``sources``: results folders (a cell or a sweep: every
    row's ``output_text``) or JSONL files (each record's ``output_text`` or ``text``).

    Raises:
        DatastoreError: a source that does not exist, or is neither a results folder nor a JSONL file
            with one of those fields on every record.
    """
    found: list[tuple[str, str]] = []
    for source in sources:
        path = Path(source).expanduser()
        if path.is_dir():
            found += _row_outputs(path)
        elif path.is_file() and path.suffix == ".jsonl":
            found += _file_outputs(path)
        else:
            raise DatastoreError(
                f"outputs {str(source)!r}: not a results folder (a finished cell's rows) nor a .jsonl file of "
                f"records with one of {list(OUTPUT_FIELDS)}"
            )
    return found


def _row_outputs(folder: Path) -> list[tuple[str, str]]:
    """Every row's output text under a results folder, labelled ``cell:sample:arm``."""
    from lade_bench.results import load_rows

    try:
        rows = load_rows(folder)
    except (OSError, ValueError) as err:
        raise DatastoreError(f"outputs {str(folder)!r}: its rows cannot be read ({str(err).splitlines()[0]})") from err
    # Arms that match AR write the same text: each distinct output is checked once.
    rows = rows[rows["output_text"].notna()].drop_duplicates("output_text")
    if rows.empty:
        raise DatastoreError(f"outputs {str(folder)!r}: no rows with an output_text (not a finished cell or sweep)")
    labels = rows["cell_id"].astype(str) + ":" + rows["sample_id"].astype(str) + ":" + rows["arm"].astype(str)
    return list(zip(labels, rows["output_text"].astype(str), strict=True))


def _file_outputs(file: Path) -> list[tuple[str, str]]:
    """Every record's output text of a JSONL file, labelled ``file:line``."""
    found = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DatastoreError(f"outputs {str(file)!r}:{number}: not JSON ({err})") from err
        text = next(
            (record[f] for f in OUTPUT_FIELDS if isinstance(record, dict) and isinstance(record.get(f), str)), None
        )
        if text is None:
            raise DatastoreError(f"outputs {str(file)!r}:{number}: no text field {list(OUTPUT_FIELDS)}")
        found.append((f"{file.name}:{number}", text))
    return found


def output_items(outputs: Sequence[tuple[str, str]], tokenizer: Any, classes: TokenClasses) -> list[Checked]:
    """Each model output as a checked item (its windows, as any benchmark text's)."""
    encoded = _encode([text for _, text in outputs], tokenizer)
    return [checked(label, "outputs", [ids], classes) for (label, _), ids in zip(outputs, encoded, strict=True)]


def dataset_items(
    dataset: str, dataset_path: str | None, tokenizer: Any, classes: TokenClasses
) -> tuple[list[Checked], int]:
    """The checked items of every sample of ``dataset`` (the whole split the cell reads) and their count.

    Raises:
        DatastoreError: the dataset does not load (the message says what is wrong, and names
            ``dataset.path`` only when it is not set).
    """
    from lade_bench.datasets.registry import get_spec, load_dataset_samples
    from lade_bench.datasets.spec import Unscored

    try:
        samples = load_dataset_samples(dataset, path=dataset_path)
    except (OSError, RuntimeError, ValueError) as err:
        problem = str(err).splitlines()[0] if str(err) else type(err).__name__
        if dataset_path is None:  # the loaders' messages mostly say how to give a file already
            hint = "" if "dataset.path" in problem else "; set dataset.path to its file"
            raise DatastoreError(f"{dataset} does not load from its default source ({problem}){hint}") from err
        raise DatastoreError(f"dataset.path={dataset_path!r} does not load as {dataset} ({problem})") from err
    scored = not isinstance(get_spec(dataset).scorer, Unscored)
    return sample_items(samples, scored, tokenizer, classes), len(samples)


def leak_report(
    path: str | Path,
    datasets: Sequence[str],
    outputs: Sequence[str | Path] = (),
    cache_dir: str | Path | None = None,
    setting: str = SETTING,
) -> dict[str, Any]:
    """The leak check of the datastore at ``path`` against ``datasets`` (``NAME`` or ``NAME=FILE``) and the
    model ``outputs`` (results folders or JSONL files), as the ``check`` command reports it.

    Returns:
        The datastore's summary, the rule, per dataset its samples, those checked (by answers, by
        prompts) and the leaking ids (or why it did not load: not a refusal here, the cell's own check
        refuses it), the outputs' leaking labels, and ``refused``: the refusal message, or None.

    Raises:
        DatastoreError: no datastore at ``path``, a damaged file, a tokenizer that does not load, or an
            outputs source that cannot be read.
    """
    datastore = load_datastore(path, setting)
    pairs = [(name, file or None) for name, _, file in (entry.partition("=") for entry in datasets)]
    return _checked(datastore, pairs, outputs, cache_dir, setting, strict=False)


def leak_refusal(
    datastore: Datastore,
    setting: str,
    dataset: str,
    dataset_path: str | None,
    outputs: Sequence[str | Path] = (),
    cache_dir: str | Path | None = None,
) -> str | None:
    """Why ``datastore`` cannot serve a cell of ``dataset`` (its file ``dataset_path``; None: the default
    source), given the model's ``outputs``; None: nothing leaks. A dataset that does not load, a tokenizer
    that does not, or unreadable outputs refuse too (the check cannot be made).

    Without ``outputs`` the verdict is kept for the process (:func:`_kept_verdict`): a sweep plans every
    cell of a datastore and dataset with the same check (Spec-Bench's REST cells, one per group and model).
    """
    try:
        if outputs:  # results folders grow between checks: never kept
            return _verdict(datastore, setting, dataset, dataset_path, outputs, cache_dir)
        return _kept_verdict(_request(datastore, setting, dataset, dataset_path, cache_dir))
    except DatastoreError as err:  # not kept: a tokenizer or dataset that did not load may load later
        return f"{setting}={str(datastore.path)!r} cannot be leak-checked: {err}"


def _request(
    datastore: Datastore, setting: str, dataset: str, dataset_path: str | None, cache_dir: str | Path | None
) -> _RefusalRequest:
    """The :class:`_RefusalRequest` of a check without outputs."""
    spec = _dataset_spec(dataset)
    return _RefusalRequest(
        key=(
            str(datastore.path),
            datastore.content_hash,
            setting,
            dataset,
            dataset_path,
            _file_stamp(dataset_path),
            id(spec),
            None if cache_dir is None else str(cache_dir),
        ),
        datastore=datastore,
        spec=spec,
    )


@dataclass(frozen=True)
class _RefusalRequest:
    """One leak check asked of :func:`_kept_verdict`: compared and hashed by ``key`` alone (the datastore's
    folder and verified content hash, the setting, the dataset, its file and that file's stamp, the dataset's
    registered spec, the model cache), carrying what computes it. ``spec`` keeps the spec alive while the
    verdict is kept, so its ``id`` in ``key`` cannot name another spec registered later under that name."""

    key: tuple[Any, ...]
    datastore: Datastore = field(compare=False, hash=False)
    spec: Any = field(compare=False, hash=False)


@functools.lru_cache(maxsize=32)
def _kept_verdict(request: _RefusalRequest) -> str | None:
    """:func:`_verdict` without outputs, computed once per process for each ``request.key`` (a check that
    raises is not kept): a datastore changed since is another content hash (``load_datastore`` recomputes it
    on every call), a dataset file changed since another stamp."""
    datastore, (_, _, setting, dataset, dataset_path, _, _, cache_dir) = request.datastore, request.key
    return _verdict(datastore, setting, dataset, dataset_path, (), cache_dir)


def _dataset_spec(dataset: str) -> Any:
    """The spec registered as ``dataset`` (None when there is none, or no dataset: the check then says so)."""
    from lade_bench.datasets.registry import get_spec

    try:
        return get_spec(dataset) if dataset else None
    except ValueError:
        return None


def _file_stamp(path: str | None) -> tuple[int, int, int] | None:
    """``(inode, size, mtime in ns)`` of the dataset file at ``path``; None for the default source or no file."""
    if path is None:
        return None
    try:
        stat = Path(path).expanduser().stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _verdict(
    datastore: Datastore,
    setting: str,
    dataset: str,
    dataset_path: str | None,
    outputs: Sequence[str | Path],
    cache_dir: str | Path | None,
) -> str | None:
    """:func:`leak_refusal`'s verdict, computed.

    Raises:
        DatastoreError: the check cannot be made (a dataset or tokenizer that does not load, unreadable outputs).
    """
    datasets = [(dataset, dataset_path)] if dataset else []
    return _checked(datastore, datasets, outputs, cache_dir, setting, strict=True)["refused"]


def _checked(
    datastore: Datastore,
    datasets: Sequence[tuple[str, str | None]],
    outputs: Sequence[str | Path],
    cache_dir: str | Path | None,
    setting: str,
    *,
    strict: bool,
) -> dict[str, Any]:
    """The leak report of ``datastore`` (see :func:`leak_report`); ``strict``: a dataset that does not load
    raises instead of being reported unavailable."""
    manifest = datastore.manifest
    try:
        tokenizer, classes = reader_of(manifest["tokenizer"], None if cache_dir is None else str(cache_dir))
    except (OSError, ValueError) as err:
        raise DatastoreError(
            f"the tokenizer {manifest['tokenizer']} does not load ({str(err).splitlines()[0]})"
        ) from err
    report: dict[str, Any] = {
        "datastore": {k: manifest.get(k) for k in ("tokenizer", "tokens", "documents", "content_hash")},
        "corpus_files": len(manifest.get("corpus") or []),
        "span_tokens": LEAK_SPAN,
        "min_span_tokens": MIN_SPAN,
        "datasets": {},
    }
    items: dict[str, list[Checked]] = {}
    counts: dict[str, int] = {}
    for name, file in datasets:
        try:
            items[name], counts[name] = dataset_items(name, file, tokenizer, classes)
        except DatastoreError as err:
            if strict:
                raise
            report["datasets"][name] = {"path": file, "unavailable": str(err)}
    texts = output_texts(outputs)
    given = output_items(texts, tokenizer, classes)
    leaked = {id(item) for item in leaking(datastore, [*given, *(i for its in items.values() for i in its)], classes)}
    parts = []
    for name, its in items.items():
        answers = [i.label for i in its if i.kind == "answers" and id(i) in leaked]
        prompts = [i.label for i in its if i.kind == "prompts" and id(i) in leaked]
        report["datasets"][name] = {
            "path": dict(datasets)[name],
            "samples": counts[name],
            "checked": len({i.label for i in its if i.hashes.size}),
            "checked_by_prompts": sum(1 for i in its if i.kind == "prompts" and i.hashes.size),
            "leaking": answers,
            "leaking_prompts": prompts,
        }
        if answers:
            parts.append(
                f"reference answers of {len(answers)} of {counts[name]} {name} samples (e.g. ids {answers[:3]})"
            )
        if prompts:
            parts.append(f"the prompts of {len(prompts)} of {counts[name]} {name} samples (e.g. ids {prompts[:3]})")
    report["datasets"] = {name: report["datasets"][name] for name, _ in datasets}  # in the order asked
    outputs_leaked = [i.label for i in given if id(i) in leaked]
    if outputs:
        report["outputs"] = {
            "sources": [str(o) for o in outputs],
            "texts": len(texts),
            "checked": sum(1 for i in given if i.hashes.size),
            "leaking": outputs_leaked,
        }
    if outputs_leaked:
        parts.append(f"{len(outputs_leaked)} of {len(texts)} model outputs given (e.g. {outputs_leaked[:3]})")
    report["refused"] = (
        f"{setting}={str(datastore.path)!r} holds {' and '.join(parts)}: a {LEAK_SPAN}-token span of each occurs in "
        "its token stream (across record boundaries), so it would draft the text it is measured on; build the "
        "datastore from a corpus without them (docs/rest.md, 'Leak check')"
        if parts
        else None
    )
    return report
