"""Prompt lookup's declaration: transformers' candidate rule on the draft-tree seam, with a compiled mode.

The engine is ``lade_bench.decoding.drafters.prompt_lookup``.
"""

from lade_bench.decoding.drafters.prompt_lookup import PromptLookupSettings, prompt_lookup_generate, prompt_lookup_reach
from lade_bench.methods.drafter_method import declare_drafter

DRAFTER = declare_drafter(
    "prompt_lookup",
    label="Prompt lookup",
    color="#ff7f0e",
    custom_mask=False,  # its candidate is a chain, fed with the model's own mask
    settings=PromptLookupSettings,
    engine=prompt_lookup_generate,
    reach=prompt_lookup_reach,
    compiles=True,
    after="lookahead",
)
