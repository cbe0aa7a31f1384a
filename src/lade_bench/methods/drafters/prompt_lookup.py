"""Prompt lookup's declaration: transformers' candidate rule on the draft-tree seam, with a compiled mode.

The engine is ``lade_bench.decoding.drafters.prompt_lookup``.
"""

from lade_bench.decoding.drafters.prompt_lookup import PromptLookupSettings, prompt_lookup_generate, prompt_lookup_reach
from lade_bench.methods.budget import Budget
from lade_bench.methods.drafter_method import declare_drafter

# The draft length and the n-gram matched, transformers' defaults (10, 2) among them: on a device whose step
# cost grows with its width, a shorter draft wastes fewer tokens.
BUDGET = Budget({"num_tokens": (2, 4, 10), "max_ngram_size": (1, 2, 3)})

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
    budget=BUDGET,
)
