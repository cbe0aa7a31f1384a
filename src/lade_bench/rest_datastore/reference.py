"""The reference datastore: what ``rest.datastore: reference`` (the default) names, and how it is built once.

It is the datastore ``<model_cache_dir>/rest_datastores/<tokenizer>/reference`` built for the cell's
tokenizer from the reference corpus (:func:`reference_corpus`) by ``python -m lade_bench.rest_datastore
build --reference --model <conf/model entry>``; ``scripts/setup.sh`` builds it for the embedded models.
The word is read in one place (:func:`resolve_datastore`), through the registry entry's ``resolve``; the
engine only ever sees a folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lade_bench.rest_datastore.build import build_from_files, datastore_folder, file_sha256
from lade_bench.rest_datastore.reader import (
    MANIFEST_FILE,
    REFERENCE,
    SETTING,
    DatastoreError,
    conf_model,
    read_manifest,
    reference_build_command,
    unresolved_reference,
)

# The reference corpus: the top-level modules (``*.py``) of the running interpreter's standard library, on
# every machine and offline, code and English prose, PSF licence; but configparser.py, which shares a
# 13-word span with ClassEval_18's solution (the leak check flags it; docs/rest.md).
REFERENCE_LEFT_OUT = ("configparser.py",)


def reference_corpus() -> list[Path]:
    """The reference corpus's files: the standard library's top-level modules, found from this interpreter."""
    import sysconfig

    stdlib = Path(sysconfig.get_path("stdlib"))
    return sorted(p for p in stdlib.glob("*.py") if p.name not in REFERENCE_LEFT_OUT)


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
        raise unresolved_reference(setting)
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

    model = conf_model(model_name)
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
