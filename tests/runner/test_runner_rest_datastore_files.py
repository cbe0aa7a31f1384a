"""A damaged REST datastore is refused when its cell is planned: every file checked (headers, dtype, shape,
ranges, the suffix array's order, the token ids against the content hash the cell id names), one line naming
the folder, the file and the rebuild command, before any model loads; nothing is written for the cell.
SAM-Decoding's static corpus (a REST datastore) is checked by the same code."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from lade_bench.rest_datastore.cli import main as datastore_command
from lade_bench.results import read_index
from lade_bench.runner import plan_cell
from lade_bench.runner.job import CONFIG_ERROR_EXIT
from lade_bench.runner.plan import CellConfigError

from .conftest import TINY

REST = [*TINY, "arms=[ar,rest]"]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> tuple[Path, Path]:
    """A datastore built by the command from a small text (the tiny models' SmolLM2 tokenizer), and its corpus."""
    folder = tmp_path_factory.mktemp("rest_files")
    corpus = folder / "corpus.txt"
    corpus.write_text("The quick brown fox jumps over the lazy dog. " * 8 + "A second sentence, for more suffixes.\n")
    out = folder / "good"
    assert datastore_command(["build", "--model", "tiny_llama", "--corpus", str(corpus), "--out", str(out)]) == 0
    return out, corpus


def _tokens(store: Path) -> np.ndarray:
    return np.load(store / "tokens.npy")


def _suffix_array(store: Path) -> np.ndarray:
    return np.load(store / "suffix_array.npy")


def _emptied(store: Path) -> None:
    """An empty store whose files agree with each other (zero tokens, an empty suffix array)."""
    np.save(store / "tokens.npy", np.zeros(0, dtype=np.uint32))
    np.save(store / "suffix_array.npy", np.zeros(0, dtype=np.int32))
    manifest = json.loads((store / "manifest.json").read_text())
    (store / "manifest.json").write_text(json.dumps({**manifest, "tokens": 0}))


def _swapped(store: Path) -> None:
    order = _suffix_array(store)
    order[[3, 4]] = order[[4, 3]]
    np.save(store / "suffix_array.npy", order)


def _changed_id(store: Path) -> None:
    tokens = _tokens(store)
    tokens[5] = (tokens[5] + 1) % 1000
    np.save(store / "tokens.npy", tokens)


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "tokens missing": (lambda s: (s / "tokens.npy").unlink(), r"tokens\.npy is missing"),
    "tokens truncated": (
        lambda s: (s / "tokens.npy").write_bytes((s / "tokens.npy").read_bytes()[:-9]),
        r"tokens\.npy cannot be read as a numpy array \(mmap length is greater than file size\)",
    ),
    "tokens corrupt": (
        lambda s: (s / "tokens.npy").write_bytes(b"\x80\x04not an array" * 4),
        r"tokens\.npy cannot be read as a numpy array",
    ),
    "tokens of another dtype": (
        lambda s: np.save(s / "tokens.npy", _tokens(s).astype(np.int64)),
        r"tokens\.npy holds a int64 array of shape \(\d+,\), not 1-D uint32 token ids",
    ),
    "tokens changed since built": (
        _changed_id,
        r"tokens\.npy is not the token ids manifest\.json's content_hash names",
    ),
    "an empty store": (_emptied, r"tokens\.npy holds no tokens \(an empty datastore drafts nothing\)"),
    "suffix array missing": (lambda s: (s / "suffix_array.npy").unlink(), r"suffix_array\.npy is missing"),
    "suffix array out of range": (
        lambda s: np.save(s / "suffix_array.npy", np.where(_suffix_array(s) == 0, 10_000, _suffix_array(s))),
        r"suffix_array\.npy has entry 10000, outside the token positions \[0, \d+\)",
    ),
    "suffix array not a permutation": (
        lambda s: np.save(s / "suffix_array.npy", np.where(_suffix_array(s) == 0, 1, _suffix_array(s))),
        r"suffix_array\.npy does not hold every token position once",
    ),
    "suffix array out of order": (_swapped, r"suffix_array\.npy is not the suffixes in sorted order \(rows 3 and 4\)"),
    "manifest without its content hash": (
        lambda s: (s / "manifest.json").write_text(
            json.dumps({k: v for k, v in json.loads((s / "manifest.json").read_text()).items() if k != "content_hash"})
        ),
        r"manifest\.json has no str 'content_hash'",
    ),
}


def _damaged(good: tuple[Path, Path], tmp_path: Path, damage: str) -> Path:
    store = tmp_path / "damaged"
    shutil.copytree(good[0], store)
    DAMAGE[damage][0](store)
    return store


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_datastore_is_refused_when_planned_naming_the_file_and_the_rebuild(
    compose_cfg, tmp_path, good, damage
):
    store = _damaged(good, tmp_path, damage)
    rebuild = f"python -m lade_bench.rest_datastore build --model smollm2 --corpus {good[1]} --out {store}"
    with pytest.raises(CellConfigError) as refused:
        plan_cell(compose_cfg([*REST, f"rest.datastore={store}"]))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"rest.datastore='{store}': ")
    assert message.endswith(f"; rebuild the datastore with {rebuild}")
    assert re.search(DAMAGE[damage][1], message), message


def test_a_refused_datastore_writes_nothing_and_loads_no_model(run_cli, tmp_path, good):
    """As a user meets it, from the command line: exit 2, one line, no model, no cell folder, no index entry."""
    store = _damaged(good, tmp_path, "suffix array out of range")
    result = run_cli(*REST, f"rest.datastore={store}")
    output = result.stdout + result.stderr
    assert result.returncode == CONFIG_ERROR_EXIT, output[-2000:]
    (error,) = [line for line in output.splitlines() if "[ERROR]" in line]
    assert "suffix_array.npy has entry 10000" in error and "rebuild the datastore with" in error
    assert "loading model" not in output and "Traceback" not in output
    runs = tmp_path / "runs"
    assert read_index(runs / "single") == []
    assert [folder.name for folder in runs.glob("single/*/")] == ["_hydra"]  # Hydra's own record, no cell


def test_an_empty_static_corpus_of_sam_decoding_is_refused_by_the_same_check(compose_cfg, tmp_path, good):
    store = _damaged(good, tmp_path, "an empty store")
    setting = "sam_decoding.static_datastore"
    with pytest.raises(CellConfigError, match=rf"{setting}='{store}': tokens\.npy holds no tokens"):
        plan_cell(compose_cfg([*TINY, "arms=[ar,sam_decoding]", f"{setting}={store}"]))
