"""lade_bench: exact Lookahead Decoding and the benchmark suite around it."""

__version__ = "0.1.0"
