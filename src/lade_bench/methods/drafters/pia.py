"""PIA's declaration; the engine is ``lade_bench.decoding.drafters.pia`` (which cites the paper and the
authors' code and states the defaults).

Its trie of output n-grams persists across a cell's requests (the authors keep it across requests):
``request.state`` is the cell's ``PiaState`` (warm), without one a fresh trie (cold).
"""

from lade_bench.decoding.drafters.pia import PiaSettings, new_pia_state, pia_generate, pia_reach
from lade_bench.methods.drafter_method import declare_drafter

DRAFTER = declare_drafter(
    "pia",
    label="PIA (Ant trie lookahead)",
    color="#8c6d31",
    custom_mask=True,  # its draft is a multi-branch tree
    settings=PiaSettings,
    engine=pia_generate,
    reach=pia_reach,
    new_state=new_pia_state,
    after="sam_decoding",
)
