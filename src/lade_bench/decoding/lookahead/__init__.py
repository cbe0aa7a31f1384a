"""Lookahead decoding's own parts: the loop (``lookahead``), the 2D window, the n-gram pool, the
multi-device shards (``parallel``, ``shards``) and the ``generate()`` front (``hf_generate``).
"""
