"""The strong-baselines table from real cells: speedups within a mode, AR's gain across settings."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from lade_bench.conf import PACKAGE_CONF_DIR
from lade_bench.report.baselines import (
    baselines_drift,
    baselines_table,
    collect_rows,
    main,
    render_markdown,
    render_summary,
)
from lade_bench.report.conditions import PROCESSOR_MIXED, PROCESSOR_UNRECORDED
from lade_bench.results.archive import is_archive
from lade_bench.runner import register_configs, run_cell

CELL = [
    "model=tiny_llama", "device=cpu", "dataset.limit=2", "max_new_tokens=8", "wandb.mode=disabled",
    "device_profile.enabled=false", "arms=[ar,lookahead,prompt_lookup]", "sweep_name=baselines",
]  # fmt: skip
SETTINGS = {
    ("float32", "eager"): ["dtype=float32"],
    ("bfloat16", "compiled"): ["dtype=bfloat16", "compile=true", "compile_options.backend=eager"],
}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    register_configs()
    root = tmp_path_factory.mktemp("runs")
    with initialize_config_dir(config_dir=str(PACKAGE_CONF_DIR), version_base="1.3"):
        for overrides in SETTINGS.values():
            run_cell(compose("config", overrides=[*CELL, *overrides, f"output_root={root}"]))
    return root / "baselines"


@pytest.fixture(scope="module")
def rows(sweep) -> pd.DataFrame:
    """The sweep's rows with each cell's dtype and processor, read once for the module."""
    return collect_rows([sweep])


@pytest.fixture(scope="module")
def table(rows) -> pd.DataFrame:
    """The baselines table of those rows, computed once for the module."""
    return baselines_table(rows)


def test_each_arm_is_compared_within_its_mode_and_ar_against_eager_float32(rows, table):
    assert set(rows["dtype"]) == {"float32", "bfloat16"}
    assert len(table) == 6
    assert set(zip(table["dtype"], table["mode"], strict=True)) == {
        ("float32", "eager"),
        ("bfloat16", "compiled (default)"),
    }
    ar = table[table["arm"] == "ar"].set_index("dtype")
    assert ar.loc["float32", "ar_gain"] == pytest.approx(1.0)
    # bf16 compiled AR against eager fp32 AR: per token, on the units both ran (both turns of 2 questions).
    compiled_ar = rows[(rows["dtype"] == "bfloat16") & (rows["arm"] == "ar")]
    eager_ar = rows[(rows["dtype"] == "float32") & (rows["arm"] == "ar")]
    expected = (eager_ar["wall_time_s"].sum() / eager_ar["new_tokens"].sum()) / (
        compiled_ar["wall_time_s"].sum() / compiled_ar["new_tokens"].sum()
    )
    assert ar.loc["bfloat16", "ar_gain"] == pytest.approx(expected)
    assert ar.loc["bfloat16", "ar_gain_n"] == 2 and math.isnan(ar.loc["bfloat16", "ar_gain_ci_low"])  # n < 10
    others = table[table["arm"] != "ar"]
    assert others["ar_gain"].isna().all() and (others["speedup"] > 0).all()
    assert (table.loc[table["mode"] != "eager", "compile_time_s"].dropna() >= 0).all()
    # The cap share comes from each row's own budget (max_new_tokens=8), on the paired outputs.
    for rec in table.to_dict("records"):
        arm_rows = rows[(rows["dtype"] == rec["dtype"]) & (rows["arm"] == rec["arm"])]
        assert rec["capped_share"] == pytest.approx(float((arm_rows["new_tokens"] >= 8).mean()))
    # Where every output is AR's, the outputs have AR's lengths and per token equals wall time.
    exact = table[table["matches_ar"] == 1.0]
    assert len(exact) >= 2 and exact["speedup_per_token"].to_numpy() == pytest.approx(exact["speedup"].to_numpy())
    markdown = render_markdown(table)
    assert "(n=2)" in markdown and "compiled (default)" in markdown


def test_the_written_table_recomputes_from_the_written_archive(sweep, rows, tmp_path):
    assert main([str(sweep), "--out", str(tmp_path)]) == 0
    archive = tmp_path / "rows" / "baselines"
    assert is_archive(archive)
    sweep_rows = rows
    rows = collect_rows([archive])
    assert len(rows) == len(sweep_rows)
    committed = pd.read_csv(tmp_path / "tables" / "baselines.csv")
    recomputed = baselines_table(rows)
    pd.testing.assert_frame_equal(
        recomputed.reset_index(drop=True), committed, check_dtype=False, check_exact=False, rtol=1e-12
    )
    assert (tmp_path / "tables" / "baselines.md").read_text() == render_markdown(committed)
    assert (tmp_path / "tables" / "baselines_summary.md").read_text() == render_summary(
        recomputed, baselines_drift(rows)
    )


def test_the_summary_has_a_column_per_setting_and_per_token_numbers(rows, table):
    lines = render_summary(table, baselines_drift(rows)).splitlines()
    assert lines[0].endswith("| float32 eager | bfloat16 compiled (default) |")
    ar = next(line for line in lines if "AR (gain over eager float32 AR)" in line)
    gain = table[(table["arm"] == "ar") & (table["dtype"] == "bfloat16")]["ar_gain"].iloc[0]
    assert ar.split("|")[-2].strip() == f"{gain:.2f}x (n=2)" and "1.00x (n=2)" in ar
    lookahead = table[(table["arm"] == "lookahead") & (table["dtype"] == "float32")].iloc[0]
    row = next(line for line in lines if "| lookahead |" in line)
    assert f"{lookahead['speedup_per_token']:.2f}x (n=2), {lookahead['matches_ar']:.0%} match AR" in row
    table_lines = lines[: lines.index("")]
    assert len(table_lines) == 2 + 3  # header, rule, one row per arm
    (cpu,) = set(table["processor"])  # one machine ran both cells: it is named under the table
    assert f"- tiny-llama, mt_bench: timed on {cpu}." in lines
    # Its two cells differ in dtype, so no AR work was timed twice and no drift is claimed.
    assert lines[-1].startswith("No two cells did identical AR work on one CPU kind")


def test_the_summary_shows_the_drift_of_identical_ar_work(sweep, tmp_path):
    """A second float32 eager cell (another lookahead configuration) times the same AR work again."""
    copy = tmp_path / "runs"
    shutil.copytree(sweep.parent, copy)
    with initialize_config_dir(config_dir=str(PACKAGE_CONF_DIR), version_base="1.3"):
        overrides = [*CELL, *SETTINGS[("float32", "eager")], "lookahead=cpu_small", f"output_root={copy}"]
        run_cell(compose("config", overrides=overrides))
    rows = collect_rows([copy / "baselines"])
    drift = baselines_drift(rows)
    # One group: the two float32 eager cells; bfloat16 compiled AR is other work.
    assert drift[["dtype", "mode", "n_cells"]].values.tolist() == [["float32", "eager", 2]]
    ar = rows[(rows["arm"] == "ar") & (rows["dtype"] == "float32")]
    per_cell = pd.Series(
        {cid: 1000 * c["wall_time_s"].sum() / c["new_tokens"].sum() for cid, c in ar.groupby("cell_id")}
    )
    assert drift["relative_spread"].iloc[0] == pytest.approx((per_cell.max() - per_cell.min()) / per_cell.median())
    summary = render_summary(baselines_table(rows), drift)
    assert f"| tiny-llama | mt_bench | float32 | eager | 2 | {per_cell.min():.2f} / " in summary
    assert f"| {drift['relative_spread'].iloc[0]:.1%} |" in summary


def test_an_unfinished_sweep_is_refused_before_any_table(sweep, tmp_path, capsys):
    copy = tmp_path / "baselines"
    shutil.copytree(sweep, copy)
    cell = next(p for p in copy.iterdir() if (p / "summary.json").is_file())
    (cell / "summary.json").unlink()
    assert main([str(copy), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{cell.name}: damaged (" in err and "summary.json: missing" in err
    assert not (tmp_path / "out" / "tables").exists()


def test_rows_without_their_dtype_are_refused(rows):
    with pytest.raises(ValueError, match="every row needs its cell's dtype"):
        baselines_table(rows.assign(dtype=None))


def _with_processor(sweep, tmp_path, dtype: str, processor: dict | None, earlier: dict | None = None):
    """A copy of the sweep whose ``dtype`` cell records ``processor`` (and an earlier run on ``earlier``)."""
    copy = tmp_path / "baselines"
    shutil.copytree(sweep, copy)
    for manifest_path in copy.glob("*/manifest.json"):
        manifest = json.loads(manifest_path.read_text())
        if str(manifest["dtype"]).removeprefix("torch.") == dtype:
            manifest["timing_conditions"]["processor"] = processor
            if earlier is not None:
                manifest["previous_runs"] = [{"timing_conditions": {"processor": earlier}}]
            manifest_path.write_text(json.dumps(manifest))
    return copy


OTHER_CPU = {"model_name": "Another CPU", "vendor": "GenuineIntel", "family": "6", "model": "85", "features": ["avx2"]}


@pytest.mark.parametrize(
    ("processor", "earlier", "label"),
    [(OTHER_CPU, None, None), (None, None, PROCESSOR_UNRECORDED), ("same", OTHER_CPU, PROCESSOR_MIXED)],
    ids=["another CPU", "not recorded", "resumed on another CPU"],
)
def test_ar_is_compared_across_cells_only_on_one_cpu_kind(sweep, rows, tmp_path, processor, earlier, label):
    # Sittings of one sweep may land on different machines; a gain across two CPUs measures the CPUs.
    (same_cpu,) = set(rows["processor"])
    assert same_cpu not in (PROCESSOR_UNRECORDED, PROCESSOR_MIXED)
    recorded = None if processor is None else first_manifest_processor(sweep) if processor == "same" else processor
    rows = collect_rows([_with_processor(sweep, tmp_path, "bfloat16", recorded, earlier)])
    table = baselines_table(rows)
    ar = table[table["arm"] == "ar"].set_index("dtype")
    assert math.isnan(ar.loc["bfloat16", "ar_gain"]) and ar.loc["bfloat16", "ar_gain_n"] == 0
    assert ar.loc["float32", "ar_gain"] == pytest.approx(1.0)  # its own reference, on its own CPU
    shown = ar.loc["bfloat16", "processor"]
    assert shown == (label or "Another CPU (GenuineIntel 6/85/?; avx2)")
    assert shown in render_markdown(table) and shown in render_summary(table, baselines_drift(rows))


def first_manifest_processor(sweep):
    """The processor the sweep's cells recorded (one machine ran them all)."""
    manifest = json.loads(next(sweep.glob("*/manifest.json")).read_text())
    return manifest["timing_conditions"]["processor"]
