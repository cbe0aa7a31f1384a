# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # What one setting changes, paired
#
# Regenerates the table a claim about a trend across cells rests on, from the per-sample rows of one
# or more sweeps: every two greedy lookahead cells of a sweep that differ in one of N, W, G or prompt
# as reference, at adjacent levels, with everything else equal (no cell chosen on its results). For
# each, both cells' speedups over their own AR on the samples both ran, the ratio of the two
# (after / before) and of their compressions, each with a 95% paired bootstrap CI over samples from 10
# samples up. Writes `knob_contrasts.tex` and `knob_contrasts.md` into `out_dir`.
#
# Run headless: `python -m lade_bench.report.notebook_runner notebooks/knob_contrasts_table.py sweep_dir=runs/ablation_wg out_dir=paper_figures/tables`

# %% tags=["parameters"]
sweep_dir = "../runs/ablation_wg"  # a sweep folder (<output_root>/<sweep_name>), or a list of them
out_dir = "../paper_figures/tables"  # where the .tex and .md files go (paths relative to notebooks/)

# %%
from lade_bench.report.sweep import load_sweep
from lade_bench.report.tables import PAPER_TABLES, write_paper_table

sweep = load_sweep(sweep_dir)
print(sweep.context_line())
print(f"{len(sweep.rows)} rows in {len(sweep.cells)} cells")

# %%
table, written = write_paper_table("knob_contrasts", sweep, out_dir)
print(PAPER_TABLES["knob_contrasts"].caption)
print("written:", written or "nothing (no two greedy cells of a sweep differ in one setting only)")
table
