"""``step_path``: the batch-invariant step path as a cell setting, end to end (issue 68).

``step_path=batch_invariant`` puts the cell's model on ``decoding.core.batch_invariant`` (every row of a
forward bit-identical however many rows share it) at load, checked on the model's shapes before any row
is timed. The plan refuses, in one line before any model loads, what the path is not offered on; the
path enters the cell id (only away from ``standard``, so every committed cell keeps its id), the folder
name (``-bi``), every row (``step_path``, schema 11: older rows read ``standard``), the manifest (what
the check ran) and the device profile's key. A real command-line cell on the embedded SmolLM2 in
bfloat16 runs on it with every lookahead row equal to AR's.
"""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from lade_bench.decoding.core import batch_invariant
from lade_bench.results import ROW_SCHEMA, SCHEMA_VERSION, CellWriter, load_rows, read_index
from lade_bench.results.schema import COLUMNS_BY_NAME, upgrade_row
from lade_bench.runner.cell import profile_key
from lade_bench.runner.job import CONFIG_ERROR_EXIT, run_job
from lade_bench.runner.plan import launch_identity, plan_cell

from ..results.results_helpers import make_row
from .conftest import REPO, TINY

BF16 = [*TINY, "dtype=bfloat16"]
ON_PATH = [*BF16, "step_path=batch_invariant"]
# The embedded SmolLM2 in bfloat16, one short one-turn question, a few tokens: cheap on one core.
SMOLLM2 = ["model=smollm2", "dtype=bfloat16", "device=cpu", "max_new_tokens=8", "warmup=0"]
QUESTION = {"question_id": 1, "category": "writing", "turns": ["Write a line about the sea."]}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["dtype=float32"],
            "step_path=batch_invariant runs in ['bfloat16'], not dtype='float32' (float32 matmuls take a one-row "
            "kernel for AR's step and another for two rows, so no fixed kernel is free there); use dtype=bfloat16, "
            "or step_path=standard",
        ),
        (
            # The configured word is refused whether or not this machine has CUDA.
            ["device=cuda"],
            "step_path=batch_invariant runs on ['cpu'], not device='cuda' (its kernels' row invariance is measured "
            "on the CPU only); use device=cpu, or step_path=standard",
        ),
        (
            ["compile=true"],
            "step_path=batch_invariant runs eager forwards, not compile=true (compiled kernels are not the ones its "
            "load-time check measures); set compile=false, or step_path=standard",
        ),
        (
            ["attn_implementation=flex_attention"],
            "step_path=batch_invariant runs its own attention (the model loads with one of ['sdpa', 'eager'], then "
            "the path replaces it), not attn_implementation='flex_attention'; use one of ['sdpa', 'eager'], or "
            "step_path=standard",
        ),
        (
            ["lookahead.devices=2", "arms=[ar,lookahead,ar_tp]"],
            "step_path=batch_invariant runs on one device, not lookahead.devices=2 (its check measures one "
            "device's kernels); set lookahead.devices=1, or step_path=standard",
        ),
    ],
    ids=["float32", "cuda", "compile", "flex_attention", "devices"],
)
def test_what_the_path_is_not_offered_on_is_refused_in_one_line_before_any_model_loads(
    compose_cfg, caplog, tmp_path, overrides, message
):
    cfg = compose_cfg([*ON_PATH, *overrides, f"output_root={tmp_path / 'runs'}"])
    with caplog.at_level(logging.INFO, logger="lade_bench"), pytest.raises(SystemExit) as exited:
        run_job(cfg)
    assert exited.value.code == CONFIG_ERROR_EXIT
    errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert errors == [message]
    assert "loading model" not in caplog.text and not (tmp_path / "runs").exists()


def test_dtype_auto_on_the_cpu_is_refused_as_the_float32_it_means(compose_cfg, tmp_path):
    with pytest.raises(ValueError, match=r"not dtype='float32'.*use dtype=bfloat16, or step_path=standard"):
        plan_cell(compose_cfg([*TINY, "dtype=auto", "step_path=batch_invariant", f"output_root={tmp_path}"]))


def test_an_unknown_step_path_is_refused_while_composing_with_the_allowed_words(compose_cfg):
    with pytest.raises(ConfigCompositionException) as refused:
        compose_cfg([*BF16, "step_path=fast"])
    assert "standard, batch_invariant" in str(refused.value.__cause__)


def test_the_path_enters_id_folder_and_profile_key_only_away_from_standard(compose_cfg, tmp_path):
    def plan(*overrides):
        return plan_cell(compose_cfg([*BF16, f"output_root={tmp_path}", *overrides]))

    default, standard, on_path = plan(), plan("step_path=standard"), plan("step_path=batch_invariant")
    # A config recorded before the setting (every committed cell's) lacks the key: the same cell.
    recorded = OmegaConf.to_container(default.cfg)
    del recorded["step_path"]
    old = plan_cell(OmegaConf.create(recorded))
    assert default.cell_id == standard.cell_id == old.cell_id and "step_path" not in default.semantic
    assert default.cell_dir == standard.cell_dir == old.cell_dir and "-bi-" not in default.cell_dir.name
    assert (default.step_path, old.step_path, old.facts.step_path) == ("standard",) * 3
    assert on_path.cell_id != default.cell_id and on_path.semantic["step_path"] == "batch_invariant"
    assert on_path.cell_dir.name == f"tiny-llama-mt_bench-N5W7G7ref-greedy-bi-{on_path.cell_id}"
    assert on_path.facts.step_path == "batch_invariant"
    assert launch_identity(on_path.cfg) != launch_identity(default.cfg)
    # Its forwards cost what the path's cost: priced on a profile of their own.
    assert profile_key(default).attn_implementation == "sdpa"
    assert profile_key(on_path).attn_implementation == "lade_batch_invariant"
    assert profile_key(on_path).slug() != profile_key(default).slug()


def test_rows_written_before_the_column_read_as_the_standard_path(tmp_path):
    assert SCHEMA_VERSION >= 11 and COLUMNS_BY_NAME["step_path"].added_in == 11
    old = {k: v for k, v in make_row(sample_id="s0").items() if k != "step_path"}
    assert upgrade_row(old)["step_path"] == "standard"
    old_schema = pa.schema([field for field in ROW_SCHEMA if field.name != "step_path"])
    pq.write_table(pa.Table.from_pylist([old], schema=old_schema), tmp_path / "rows.parquet")
    assert load_rows(tmp_path)["step_path"].tolist() == ["standard"]
    # Beside a new row in one cell (a JSON line of each).
    (tmp_path / "rows.parquet").unlink()
    (tmp_path / "rows.jsonl").write_text(json.dumps(old) + "\n")
    writer = CellWriter(tmp_path)
    writer.append(make_row(sample_id="s1", step_path="batch_invariant"))
    writer.finalize()
    assert load_rows(tmp_path)["step_path"].tolist() == ["standard", "batch_invariant"]
    # The committed results: every row ran the standard path.
    committed = load_rows(REPO / "paper_figures" / "spec_bench" / "rows" / "spec_bench")
    assert len(committed) and set(committed["step_path"]) == {"standard"}


# The real SmolLM2 command-line cell on the path (rows, folder, manifest, the faster-AR baseline) is checked in
# tests/report/test_report_batch_invariant.py, on the one cell that module runs for its table.


@pytest.mark.slow
def test_from_the_command_line_a_head_whose_kernel_changes_with_rows_runs_in_pieces_it_keeps_exact(run_cli, tmp_path):
    """The tiny models' 32 -> 49152 LM head took another bfloat16 kernel for a few rows than for one on the Intel
    Xeon with AMX (2026-12-07): the load-time check measures that shape's row chunk below the others', the
    manifest records it, and the cell runs with lookahead equal to AR."""
    result = run_cli(*ON_PATH, "arms=[ar,lookahead]")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    (entry,) = read_index(tmp_path / "runs" / "single")
    cell_dir = tmp_path / "runs" / "single" / entry["cell_dir"]
    check = json.loads((cell_dir / "manifest.json").read_text())["step_path"]["check"]
    chunks = {tuple(shape): chunk for shape, chunk in zip(check["linear_shapes"], check["linear_chunks"], strict=True)}
    if chunks[(32, 49152)] == batch_invariant.LINEAR_ROW_CHUNK:
        pytest.skip("this CPU's kernel keeps the tiny head's rows identical at every count: nothing to cut")
    assert 1 <= chunks[(32, 49152)] < batch_invariant.LINEAR_ROW_CHUNK
    rows = load_rows(cell_dir)
    assert rows["error"].isna().all() and rows.loc[rows["arm"] == "lookahead", "matches_ar"].all()
