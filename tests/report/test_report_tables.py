"""Paper tables: the rows they must contain and their numbers, recomputed from the rows on disk."""

from __future__ import annotations

import pandas as pd

from lade_bench import stats
from lade_bench.report import tables
from lade_bench.report.sweep import sweep_from_rows
from lade_bench.report.table_format import latex_escape, to_latex, to_markdown

SPEEDUP = "Speedup, wall time (95% CI)"


def _speedup(rows: pd.DataFrame, cell_id: str, arm: str) -> float:
    """Ratio of summed wall times over the keys where every arm of the cell succeeded."""
    cell = rows[rows["cell_id"] == cell_id]
    good = cell[cell["error"].isna()].set_index(["sample_id", "turn", "repeat"])
    arms_per_key = good.groupby(level=[0, 1, 2])["arm"].nunique()
    keys = arms_per_key[arms_per_key == cell["arm"].nunique()].index
    common = good[good.index.isin(keys)]
    return float(common[common["arm"] == "ar"]["wall_time_s"].sum() / common[common["arm"] == arm]["wall_time_s"].sum())


def _per_sample_mean(rows: pd.DataFrame, cell_id: str, arm: str) -> float:
    """Mean over samples of t_AR / t_arm, each summed over the sample's paired turns and repeats."""
    cell = rows[rows["cell_id"] == cell_id]
    good = cell[cell["error"].isna()]
    arms_per_key = good.groupby(["sample_id", "turn", "repeat"])["arm"].nunique()
    keys = set(arms_per_key[arms_per_key == cell["arm"].nunique()].index)
    common = good[[k in keys for k in zip(good["sample_id"], good["turn"], good["repeat"], strict=True)]]
    per_sample = common.groupby(["sample_id", "arm"])["wall_time_s"].sum().unstack()
    return float((per_sample["ar"] / per_sample[arm]).mean())


def _cell(rows: pd.DataFrame, **identity) -> str:
    mask = pd.Series(True, index=rows.index)
    for column, value in identity.items():
        mask &= rows[column] == value
    ids = rows[mask]["cell_id"].unique()
    assert len(ids) == 1, identity
    return str(ids[0])


def test_main_table_rows_and_numbers(sweep):
    table = tables.main_speedup_table(sweep)
    assert list(table["Dataset"]) == ["toy_code"] * 3 + ["toy_sum"] * 3
    assert list(table["Method"]) == ["AR", "Lookahead", "Prompt lookup"] * 2
    assert set(table["Sweep"]) == {"unit_report"} and set(table["Selection"]) == {"only candidate"}
    cid = _cell(sweep.rows, dataset="toy_sum", ngram=3, window=3, guesses=3, do_sample=False, prompt_as_reference=True)
    row = table[(table["Dataset"] == "toy_sum") & (table["Method"] == "Lookahead")].iloc[0]
    # three samples: the point estimate and why there is no interval
    assert row[SPEEDUP] == f"{_speedup(sweep.rows, cid, 'lookahead'):.2f} (no interval: 3 samples (< 10))"
    assert row["Per-sample mean"] == f"{_per_sample_mean(sweep.rows, cid, 'lookahead'):.2f}"
    assert (row["N"], row["W"], row["G"]) == ("3", "3", "3")
    assert row["Matches AR (%)"] == "100.0"
    assert (row["Samples"], row["Pairs"], row["Errors"]) == ("3", "3", "0")
    code = table[(table["Dataset"] == "toy_code") & (table["Method"] == "Lookahead")].iloc[0]
    assert (code["Samples"], code["Pairs"], code["Errors"]) == ("2", "4", "2")
    assert table[table["Method"] == "AR"][SPEEDUP].eq("1.00 (baseline)").all()
    # Every toy output runs to the 16-token budget (the tiny model emits no EOS); quality is the dataset's metric.
    assert row["At cap"] == "3/3" and row["Quality"].startswith("ROUGE-L ")
    assert code["At cap"] == "4/4" and code["Quality"].startswith("pass@1 ")


def test_ablation_table_has_w1_g1_and_no_reference_rows(sweep):
    table = tables.ablation_wg_table(sweep)
    toy = table[table["Dataset"] == "toy_sum"]
    shapes = set(zip(toy["N"], toy["W"], toy["G"], toy["Prompt as ref."], strict=True))
    assert shapes == {
        ("3", "1", "1", "yes"),
        ("3", "1", "3", "yes"),
        ("3", "3", "1", "yes"),
        ("3", "3", "3", "yes"),
        ("3", "3", "3", "no"),
        ("4", "3", "3", "yes"),
    }
    cid = _cell(sweep.rows, dataset="toy_sum", ngram=3, window=1, guesses=1)
    w1 = toy[(toy["W"] == "1") & (toy["G"] == "1")].iloc[0]
    assert w1[SPEEDUP].startswith(f"{_speedup(sweep.rows, cid, 'lookahead'):.2f} (no interval")
    assert w1["Sweep"] == "unit_report"
    assert w1["Tokens/step"] == "4"  # (W + G) * (N - 1)


def test_sampling_table_rouge_and_delta(sweep):
    table = tables.sampling_rouge_table(sweep)
    assert list(table["Method"]) == ["AR", "Lookahead"]
    rows = sweep.rows[sweep.rows["do_sample"]]
    assert rows["error"].isna().all()  # no failure in this cell: the paired units are all rows
    means = {arm: rows[rows["arm"] == arm][["rouge1", "rouge2", "rougeL"]].mean() for arm in ("ar", "lookahead")}
    for label, arm in (("AR", "ar"), ("Lookahead", "lookahead")):
        got = table[table["Method"] == label].iloc[0]
        assert got["ROUGE-1"] == f"{100 * means[arm]['rouge1']:.2f}"
        assert got["ROUGE-L"] == f"{100 * means[arm]['rougeL']:.2f}"
        assert got["Temp."] == "0.70" and got["top-p"] == "0.90"
    delta = 100 * (means["lookahead"]["rougeL"] - means["ar"]["rougeL"])
    assert table.iloc[1]["Δ ROUGE-L (95% CI)"] == f"{delta:.2f} (no interval: 3 samples (< 10))"
    assert table.iloc[0]["Δ ROUGE-L (95% CI)"] == ""
    assert table.iloc[1]["Speedup per token (95% CI)"].endswith("(no interval: 3 samples (< 10))")


def test_write_paper_table_is_deterministic(sweep, tmp_path):
    first, files = tables.write_paper_table("ablation_wg", sweep, tmp_path / "a")
    _, again = tables.write_paper_table("ablation_wg", sweep, tmp_path / "b")
    assert [f.name for f in files] == ["ablation_wg.tex", "ablation_wg.md"]
    for a, b in zip(files, again, strict=True):
        assert a.read_bytes() == b.read_bytes()
    tex = files[0].read_text()
    assert "\\begin{tabular}" in tex and "\\label{tab:ablation_wg}" in tex and "toy\\_sum" in tex
    assert str(tmp_path) not in tex  # provenance names the sweep, never a machine path


def test_empty_table_is_not_written(sweep, tmp_path):
    greedy_only = sweep_from_rows(sweep.rows[~sweep.rows["do_sample"]])
    spec = tables.PAPER_TABLES["sampling_rouge"]
    assert tables.write_table(spec.build(greedy_only), tmp_path, spec, "p") is None
    assert not list(tmp_path.iterdir())


def test_formatters():
    frame = pd.DataFrame({"a_b": ["x|y", "50%"], "n": ["1.00", "n/a"]})
    md = to_markdown(frame)
    assert md.splitlines()[1] == "|:---|---:|"  # n/a does not start like a number
    assert "x\\|y" in md
    assert latex_escape("a_b & 50% Δ") == "a\\_b \\& 50\\% $\\Delta$"
    tex = to_latex(frame, caption="c_1", label="tab:x", comment="from x")
    assert tex.startswith("% from x\n") and "\\caption{c\\_1}" in tex
    assert tables.fmt(float("nan")) == "n/a" and tables.fmt(0.1234, 1, 100) == "12.3"
    assert tables.fmt_speedup(1.5, 1.2, 1.9) == "1.50 [1.20, 1.90]"
    assert tables.fmt_speedup(1.5, float("nan"), float("nan"), "no interval: 3 samples (< 10)") == (
        "1.50 (no interval: 3 samples (< 10))"
    )
    assert tables.fmt_estimate(0.0123, 0.01, 0.02, "", 2, 100.0) == "1.23 [1.00, 2.00]"


def test_the_contrast_table_lists_every_one_setting_change_and_its_paired_numbers(sweep):
    """Every two greedy cells of one dataset that differ in one setting, numbers from stats.cell_contrast."""
    table = tables.knob_contrasts_table(sweep)
    assert sorted(zip(table["Dataset"], table["Change"], table["Held"], strict=True)) == [
        ("toy_sum", "G 1 -> 3", "N3 W1 ref. on"),
        ("toy_sum", "G 1 -> 3", "N3 W3 ref. on"),
        ("toy_sum", "N 3 -> 4", "W3 G3 ref. on"),
        ("toy_sum", "W 1 -> 3", "N3 G1 ref. on"),
        ("toy_sum", "W 1 -> 3", "N3 G3 ref. on"),
        ("toy_sum", "prompt as ref. off -> on", "N3 W3 G3"),
    ]
    found = stats.knob_contrasts(sweep.summary, sweep.rows, intervals=sweep.intervals)
    by_cell = dict(list(sweep.rows.groupby("cell_id")))
    for rec, shown in zip(found.to_dict("records"), table.to_dict("records"), strict=True):
        contrast = stats.cell_contrast(by_cell[rec["cell_from"]], by_cell[rec["cell_to"]], intervals=sweep.intervals)
        ratio = contrast.speedup_ratio
        assert shown["Speedup before"] == tables.fmt(contrast.speedup_from)
        assert shown["Speedup after / before (95% CI)"] == tables.fmt_estimate(
            ratio.value, ratio.low, ratio.high, ratio.note
        )
        assert shown["Samples"] == str(ratio.n_units) and shown["Pairs"] == str(ratio.n_pairs)
