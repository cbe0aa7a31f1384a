"""The shared step machinery every method runs on: parameters and results (``params``), the executor seam,
the forward and KV-cache helpers, masks and layouts of a step, verification and emission, timing, position
limits, the compiled (static-shape) step, and the model capability checks (``checks``).

The lowest room of the engine: it imports no other room.
"""
