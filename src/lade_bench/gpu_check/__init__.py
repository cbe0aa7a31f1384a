"""The GPU check (``python -m lade_bench.gpu_check``; ``bash scripts/gpu_check.sh`` installs and runs it)."""
