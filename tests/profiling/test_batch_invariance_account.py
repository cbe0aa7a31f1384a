"""The op-by-op account of batch invariance (issue 68): measured on a tiny model, refused on bad input, quoted
honestly by docs/engine.md.

The account runs once on a tiny bfloat16 Llama (a few dozen rows, about a second); the committed table
(``paper_figures/batch_invariance/ops.csv``) is only read.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from lade_bench.models import tiny_model
from lade_bench.profiling.batch_invariance import account_model
from lade_bench.profiling.batch_invariance.__main__ import main
from lade_bench.profiling.batch_invariance.table import format_diff

ROOT = Path(__file__).resolve().parents[2]
OPS_CSV = ROOT / "paper_figures" / "batch_invariance" / "ops.csv"
ENGINE_DOC = ROOT / "docs" / "engine.md"
SECTION = re.compile(r"<!-- batch_invariance_prose -->(.*?)<!-- /batch_invariance_prose -->", re.S)
# Names whose digits are no measured number (a CPU generation, model names, the issue).
NAMES = ("AMD Zen 4", "SmolLM2-135M-Instruct", "Gemma-3-270M", "issue 68")
# A number standing on its own: not part of a word (bfloat16, N5), a name (SmolLM2-135M) or a path.
NUMBER = re.compile(r"(?<![\w.\-/])\d+(?:\.\d+)?(?:e-\d+)?(?![\w\-/]|\.\d)")


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    """The account of a tiny bfloat16 Llama's last layer: 20 cached tokens, steps of up to 64 rows, N5W7G7."""
    model = tiny_model("llama", init_scale=1.0, seed=7, dtype=torch.bfloat16)
    ids = torch.randint(3, 128, (84,), generator=torch.Generator().manual_seed(0))
    found = account_model(model, ids, layer=1, cache_tokens=20, row_counts=(1, 2, 8, 33, 64), tree=(5, 7, 7))
    return pd.DataFrame(found)


def test_the_standard_attention_differs_and_the_batch_invariant_path_never_does(records):
    standard = records[records["path"] == "standard"]
    attention = standard[standard["op"] == "attention"]
    assert (attention["rows_differing"] > 0).any(), attention
    invariant = records[records["path"] == "batch_invariant"]
    assert set(invariant["op"]) == set(standard["op"]) >= {"attention", "softmax", "rotary", "lm_head"}
    assert (invariant["rows_differing"] == 0).all(), invariant[invariant["rows_differing"] > 0]
    assert set(invariant["step"]) == {"1 rows", "2 rows", "8 rows", "33 rows", "64 rows", "tree N5W7G7"}


def test_bad_input_is_refused_before_any_model_loads(tmp_path, capsys):
    out = tmp_path / "table"
    assert main(["--out", str(out), "--models", "smollm2", "--layer", "30"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("--layer 30 is not a layer of smollm2; use 0..29") and "\n" not in error
    with pytest.raises(SystemExit):
        main(["--out", str(out), "--tree", "1", "7", "7"])
    assert "--tree N=1 is not a lookahead shape; N is at least 2" in capsys.readouterr().err
    assert not out.exists()


def _printed(table: pd.DataFrame) -> set[str]:
    """Every number the committed table prints: counts, row counts, layers, cache sizes, differences."""
    counts = {str(int(v)) for column in ("step_rows", "rows_differing", "layer", "cache_tokens") for v in table[column]}
    return counts | {format_diff(v) for v in table["max_abs_diff"]}


def test_every_number_the_engine_doc_states_is_in_the_committed_table():
    table = pd.read_csv(OPS_CSV)
    found = SECTION.search(ENGINE_DOC.read_text(encoding="utf-8"))
    assert found, "docs/engine.md: no <!-- batch_invariance_prose --> section"
    text = found.group(1)
    for name in NAMES:
        text = text.replace(name, "")
    stated = NUMBER.findall(text)
    assert len(stated) >= 10, stated
    assert not set(stated) - _printed(table), sorted(set(stated) - _printed(table))
