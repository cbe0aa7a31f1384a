"""Token Recycling's declaration; the engine is ``lade_bench.decoding.drafters.token_recycling``.

Its adjacency matrix persists across a cell's requests (the paper's setting): ``request.state`` is the
cell's ``RecyclingState`` (warm), without one a fresh matrix (cold).
"""

from lade_bench.decoding.drafters.token_recycling import (
    TokenRecyclingSettings,
    new_recycling_state,
    token_recycling_generate,
    token_recycling_reach,
)
from lade_bench.methods.drafter_method import declare_drafter

DRAFTER = declare_drafter(
    "token_recycling",
    label="Token Recycling",
    color="#e377c2",
    custom_mask=True,  # its draft is the template's tree
    settings=TokenRecyclingSettings,
    engine=token_recycling_generate,
    reach=token_recycling_reach,
    new_state=new_recycling_state,
    after="ar_pp",
)
