"""The assisted arm (a draft model) and the ar_pp arm (pipeline-parallel AR) in the runner: a real cell
on tiny models, the draft's columns, the cell id, and the refusals the plan makes before any model loads."""

from __future__ import annotations

import math

import pytest

from lade_bench import stats
from lade_bench.decoding import DecodingConfigError
from lade_bench.report.sweep import load_sweep
from lade_bench.report.tables import DRAFT_SHARE_HEADER, main_speedup_table
from lade_bench.results import load_rows
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.plan import CellConfigError

from .conftest import TINY

DRAFT = ["model@assistant.model=tiny_gpt2", "assistant.num_assistant_tokens=3"]


def test_assisted_cell_matches_ar_and_records_the_draft(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, *DRAFT, "arms=[ar,assisted]", "dataset.limit=2", "warmup=1", f"output_root={tmp_path}"])
    outcome = run_cell(cfg)
    summary = outcome.summary["arms"]
    assert summary["assisted"]["matches_ar"] == 1.0 and summary["assisted"]["speedup"] > 0
    rows = load_rows(outcome.cell_dir)
    assert rows["error"].isna().all()
    assisted, ar = rows[rows["arm"] == "assisted"], rows[rows["arm"] == "ar"]
    assert (assisted["draft_forwards"] > 0).all() and (assisted["draft_time_s"] > 0).all()
    assert (assisted["draft_time_s"] < assisted["wall_time_s"]).all()
    assert ar["draft_forwards"].isna().all() and ar["draft_time_s"].isna().all()
    assert_draft_counted(outcome, rows)


def assert_draft_counted(outcome, rows) -> None:
    """Target forwards counted as steps, and the draft's share of the time in the summary and main table."""
    assisted = rows[rows["arm"] == "assisted"]
    for _, row in assisted.iterrows():
        assert len(row["accept_lengths"]) == row["decode_steps"] and sum(row["accept_lengths"]) == row["new_tokens"]
    records = {rec["arm"]: rec for rec in stats.summarize_cell(rows)}
    share = assisted["draft_time_s"].sum() / assisted["wall_time_s"].sum()
    assert records["assisted"]["draft_time_share"] == pytest.approx(share) and 0 < share < 1
    assert math.isnan(records["ar"]["draft_time_share"])
    table = main_speedup_table(load_sweep(outcome.cell_dir.parent))
    assert list(table[DRAFT_SHARE_HEADER]) == ["", f"{100 * share:.1f}"]


def test_the_draft_section_enters_the_cell_id_only_with_the_assisted_arm(compose_cfg):
    base = plan_cell(compose_cfg([*TINY]))
    assert "assistant" not in base.semantic
    assert plan_cell(compose_cfg([*TINY, *DRAFT])).cell_id == base.cell_id
    assisted = plan_cell(compose_cfg([*TINY, *DRAFT, "arms=[ar,assisted]"]))
    assert assisted.semantic["assistant"]["model"]["name"] == "tiny-gpt2"
    assert assisted.semantic["assistant"]["model"]["source"] == "tiny"  # the Enum as its word
    other = plan_cell(compose_cfg([*TINY, *DRAFT, "arms=[ar,assisted]", "assistant.num_assistant_tokens=5"]))
    assert other.cell_id != assisted.cell_id


@pytest.mark.parametrize(
    ("override", "error", "message"),
    [
        ("arms=[ar,assisted]", CellConfigError, "needs a draft model: pick one from the model group"),
        (
            "arms=[ar,assisted] model@assistant.model=tiny_gpt2 assistant.num_assistant_tokens_schedule=heuristic",
            CellConfigError,
            "num_assistant_tokens_schedule='heuristic' is not allowed",
        ),
        (
            "arms=[ar,assisted] model@assistant.model=tiny_gpt2 assistant.num_assistant_tokens=0",
            CellConfigError,
            "assistant.num_assistant_tokens=0",
        ),
        (
            "arms=[ar,assisted] model@assistant.model=tiny_gpt2 assistant.model.architecture=nope",
            CellConfigError,
            "assistant.model.architecture='nope' is not a tiny architecture",
        ),
        ("arms=[ar,ar_pp]", CellConfigError, "lookahead.devices=1 is the ar arm"),
        ("arms=[ar,lookahead,ar_pp] lookahead.devices=2 device=cpu", CellConfigError, "device=cpu has none"),
    ],
)
def test_refusals_come_from_the_plan(compose_cfg, override, error, message):
    with pytest.raises(error) as info:
        plan_cell(compose_cfg([*TINY, *override.split()]))
    assert message in str(info.value)


def test_ar_pp_without_enough_gpus_is_refused_before_loading(compose_cfg, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    cfg = compose_cfg([*TINY, "device=auto", "arms=[ar,lookahead,ar_pp]", "lookahead.devices=2"])
    with pytest.raises(CellConfigError, match="needs lookahead.devices=2 CUDA devices visible to rank 0, and 1 are"):
        plan_cell(cfg)


def test_ar_pp_alone_counts_as_using_the_devices(compose_cfg, monkeypatch):
    """lookahead.devices > 1 needs an arm that uses the devices; ar_pp is one (refused here for the GPUs)."""
    cfg = compose_cfg([*TINY, "arms=[ar,ar_pp]", "lookahead.devices=2"])
    with pytest.raises(CellConfigError) as info:
        plan_cell(cfg)
    assert "is used only by the arms" not in str(info.value) and "ar_pp" in str(info.value)


def test_assisted_settings_errors_are_decoding_errors_in_the_engine():
    from lade_bench.decoding.baselines.assisted import validate_assistant_settings

    with pytest.raises(DecodingConfigError, match="in \\[0, 1\\)"):
        validate_assistant_settings(5, "constant", -0.1, 10, 10)


def test_lp_scaling_sweep_runs_ar_pp_beside_ar_tp(compose_cfg, monkeypatch):
    """On a machine with the GPUs, the lp_scaling sweep's K-device launch plans all four arms."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    overrides = ["+sweep=lp_scaling", "lookahead.devices=4", "arms=[ar,lookahead,ar_tp,ar_pp]"]
    plan = plan_cell(compose_cfg(overrides))
    assert plan.arms == ("ar", "lookahead", "ar_tp", "ar_pp") and plan.semantic["devices"] == 4


@pytest.mark.slow
def test_gemma_target_with_a_smollm2_draft_runs_universal_assisted_decoding(compose_cfg, tmp_path, caplog):
    """The offline real pair: Gemma-3-270M (262,144 ids) verifies SmolLM2-135M's (49,152 ids) proposals,
    re-tokenised between the two vocabularies; greedy output equals AR's. The pair's longer run, on the
    article whose draft cache once broke it, is tests/decoding/test_assisted.py's; this one is the runner's
    part (the roles, the pairing, the rows), so 6 tokens: a draft round or two per turn."""
    overrides = [
        "model=gemma3_270m", "model@assistant.model=smollm2", "arms=[ar,assisted]", "device=cpu",
        "dataset.limit=1", "max_new_tokens=6", "warmup=0", "lookahead=cpu_small", "assistant.num_assistant_tokens=4",
        "wandb.mode=disabled", "device_profile.enabled=false", f"output_root={tmp_path}",
    ]  # fmt: skip
    with caplog.at_level("INFO", logger="lade_bench.runner.roles"):
        outcome = run_cell(compose_cfg(overrides))
    assert "universal assisted decoding" in caplog.text
    assert outcome.summary["arms"]["assisted"]["matches_ar"] == 1.0
    rows = load_rows(outcome.cell_dir)
    assisted = rows[rows["arm"] == "assisted"]
    assert rows["error"].isna().all() and (assisted["draft_forwards"] > 0).all()
    assert_draft_counted(outcome, rows)
