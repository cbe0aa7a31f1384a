"""PIA's registry pieces: its section ``pia`` is the engine's :class:`PiaSettings`, its per-cell state a trie.

The engine is ``lade_bench.decoding.drafters.pia`` (which cites the paper and the authors' code and states the
defaults). The trie of output n-grams persists across a cell's requests (the authors keep it across
requests); ``request.state`` is the cell's ``PiaState`` (warm), and without one (bench, gpu_check, a
direct call) a fresh trie: cold. Its refusal is a setting out of range, named.
"""

from __future__ import annotations

from lade_bench.decoding.drafters.pia import PiaSettings, new_pia_state, pia_generate, pia_reach
from lade_bench.methods.drafter_method import DrafterMethod

PIA = DrafterMethod("pia", PiaSettings, pia_generate, new_pia_state, pia_reach)
