"""Whether a cell may draft from a datastore, asked by the plan before any model loads.

The one question the registry glue (``methods/datastore_setting.py``) asks for every method that reads a
datastore (REST's ``rest.datastore``, SAM-Decoding's ``sam_decoding.static_datastore``): the datastore read
and every file checked (``reader.load_datastore``), its tokenizer, and the token leak check (``leak``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lade_bench.rest_datastore.leak import leak_refusal
from lade_bench.rest_datastore.reader import SETTING, DatastoreError, check_tokenizer, load_datastore


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
    (``rest_datastore.leak``, the tokenizer read from the model cache ``cache_dir``). ``setting`` is the
    config key that named it (REST's ``rest.datastore``, SAM-Decoding's ``sam_decoding.static_datastore``),
    quoted in the message.
    """
    try:
        datastore = load_datastore(path, setting)
        if tokenizer:
            check_tokenizer(path, tokenizer, setting)
    except DatastoreError as err:
        return str(err)
    if not dataset and not outputs:
        return None
    return leak_refusal(datastore, setting, dataset, dataset_path, outputs, cache_dir)
