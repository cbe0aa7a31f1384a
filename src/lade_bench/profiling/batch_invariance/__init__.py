"""The measured account of batch invariance on the CPU (issue 68): ``python -m lade_bench.profiling.batch_invariance``.

For each op of a real model's decoder layer, on the standard and the batch-invariant step paths, a
row computed alone (as AR computes it) against the same row inside k-row steps and inside a lookahead
tree step, bit for bit (:mod:`.account`); the committed table is ``paper_figures/batch_invariance/``
(:mod:`.table`), summarised in docs/engine.md, "Batch invariance on the CPU".
"""

from lade_bench.profiling.batch_invariance.account import COLUMNS, PATHS, ROW_COUNTS, TREE, account_model

__all__ = ["COLUMNS", "PATHS", "ROW_COUNTS", "TREE", "account_model"]
