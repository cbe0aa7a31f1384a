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
# # Main speedup table
#
# Regenerates the paper's main table from the per-sample rows of a sweep: per sweep, model and dataset,
# one headline cell, never chosen on the samples it reports (the configuration the sweep declared in
# `report.headline`; else the only candidate; else the best on half A of the samples, reported on half
# B; the Selection column says which), with the speedup of every decoding method over autoregressive
# decoding (ratio of summed wall times, 95% paired bootstrap CI over samples, shown only from 10
# samples up), its compression (tokens per forward pass), throughput, match rate with AR and its n
# (samples, pairs, errors). Writes `main_speedup.tex` and `main_speedup.md` into `out_dir`.
#
# Run headless: `python -m lade_bench.report.notebook_runner notebooks/main_table.py sweep_dir=runs/main out_dir=paper_figures/tables`

# %% tags=["parameters"]
sweep_dir = "../runs/main"  # a sweep folder (<output_root>/<sweep_name>), or a list of them
out_dir = "../paper_figures/tables"  # where the .tex and .md files go (paths relative to notebooks/)

# %%
from lade_bench.report.sweep import load_sweep
from lade_bench.report.tables import PAPER_TABLES, write_paper_table

sweep = load_sweep(sweep_dir)
print(sweep.context_line())
print(f"{len(sweep.rows)} rows in {len(sweep.cells)} cells")

# %%
table, written = write_paper_table("main_speedup", sweep, out_dir)
print(PAPER_TABLES["main_speedup"].caption)
print("written:", written or "nothing (no greedy cells in this sweep)")
table
