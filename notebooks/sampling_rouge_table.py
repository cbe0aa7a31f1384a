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
# # Sampling ROUGE table
#
# Regenerates the paper's quality-under-sampling table from the per-sample rows of a sweep: for every
# sampling cell, ROUGE-1/2/L (x100) of AR and of each method on the same prompts and seeds (the units
# where every method succeeded), the paired difference in ROUGE-L to AR, and the speedup per token over
# AR (ratio of time per generated token, since sampled outputs differ in length), each with a 95% CI
# over samples from 10 samples up. Lookahead sampling is built to keep AR's output distribution, so the
# differences should stay within sampling noise.
# Writes `sampling_rouge.tex` and `sampling_rouge.md` into `out_dir`.
#
# Run headless: `python -m lade_bench.report.notebook_runner notebooks/sampling_rouge_table.py sweep_dir=runs/sampling out_dir=paper_figures/tables`

# %% tags=["parameters"]
sweep_dir = "../runs/sampling"  # a sweep folder (<output_root>/<sweep_name>), or a list of them
out_dir = "../paper_figures/tables"  # where the .tex and .md files go (paths relative to notebooks/)

# %%
from lade_bench.report.sweep import load_sweep
from lade_bench.report.tables import PAPER_TABLES, write_paper_table

sweep = load_sweep(sweep_dir)
print(sweep.context_line())
print(f"{len(sweep.rows)} rows in {len(sweep.cells)} cells")

# %%
table, written = write_paper_table("sampling_rouge", sweep, out_dir)
print(PAPER_TABLES["sampling_rouge"].caption)
print("written:", written or "nothing (no sampling cells in this sweep)")
table
