"""What a method's cell needs beyond the config's defaults to run in the exactness grid, by method name.

Most methods need nothing. A method that drafts from an external resource (REST's datastore) gets
one built here from the grid's own runs (each architecture's prompt and AR greedy continuation), so
that its drafts are really accepted there; the grid then checks that they are. Each entry:
``(runs, folder, tokenizer) -> Hydra overrides naming the resource``, where ``runs`` are token
sequences, ``folder`` is a fresh directory and ``tokenizer`` the grid model config's
``models.loading.tokenizer_source``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

# The tiny models of the grid have this many token ids (tests/conftest.py's tiny_models).
GRID_VOCAB = 128


def _rest_datastore(runs: Sequence[Sequence[int]], folder: Path, tokenizer: str) -> list[str]:
    from lade_bench.rest_datastore.build import write_datastore

    path = write_datastore(folder / "rest_datastore", runs, tokenizer=tokenizer, vocab_size=GRID_VOCAB)
    return [f"rest.datastore={path}"]


GRID_RESOURCES: dict[str, Callable[[Sequence[Sequence[int]], Path, str], list[str]]] = {
    "rest": _rest_datastore,
}
