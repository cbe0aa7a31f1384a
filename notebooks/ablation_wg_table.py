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
# # W/G ablation table
#
# Regenerates the paper's ablation of the lookahead shape from the per-sample rows of a sweep: every
# greedy lookahead cell with its N, W, G and prompt-as-reference setting, including the W=1 (one
# lookahead column), G=1 (one verified n-gram per step) and no-prompt-reference rows, with the speedup
# over AR (95% CI over samples, shown only from 10 samples up), compression and n (samples, pairs,
# errors). Writes `ablation_wg.tex` and `ablation_wg.md` into `out_dir`.
#
# Run headless: `python -m lade_bench.report.notebook_runner notebooks/ablation_wg_table.py sweep_dir=runs/ablation_wg out_dir=paper_figures/tables`

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
table, written = write_paper_table("ablation_wg", sweep, out_dir)
print(PAPER_TABLES["ablation_wg"].caption)
print("written:", written or "nothing (no greedy lookahead cells in this sweep)")
table
