"""The assisted arm's config section ``assistant``: the draft model and the draft settings.

The draft is chosen in ``conf/settings.yaml``'s defaults list (``model@assistant.model=NAME``, any
``conf/model/`` entry); a draft with another tokenizer runs transformers' universal assisted
decoding. The draft settings default to transformers' own (``lade_bench.decoding.core.params``), so the
arm measures its assisted generation as shipped (docs/assisted.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from lade_bench.decoding.core.params import (
    ASSISTED_CONFIDENCE_THRESHOLD,
    ASSISTED_LOOKBEHIND,
    ASSISTED_NUM_TOKENS,
    ASSISTED_SCHEDULE,
)
from lade_bench.model_config import ModelConfig

# The section's name: ``assistant`` (not the method's name), as cells with the arm were recorded and
# hashed before the section moved onto the entry; their ids, and ``model@assistant.model``, stay.
ASSISTED_SECTION = "assistant"


@dataclass
class AssistantConfig:
    """Section ``assistant`` of the ``assisted`` arm (draft-model speculative decoding, transformers'
    assisted generation; see ``lade_bench.decoding.baselines.assisted``).

    Attributes:
        model: the draft, any entry of the ``model`` group (``model@assistant.model=NAME``); null: none.
        num_assistant_tokens: most tokens the draft proposes per target forward.
        num_assistant_tokens_schedule: ``constant`` or ``heuristic_transient`` (``heuristic`` carries
            state across generations: refused).
        assistant_confidence_threshold: the draft stops proposing below this top probability (0: off).
        assistant_lookbehind: universal assisted decoding: draft tokens re-encoded to align tokenisations.
        target_lookbehind: universal assisted decoding: target tokens re-encoded to align tokenisations.
    """

    model: ModelConfig | None = None
    num_assistant_tokens: int = ASSISTED_NUM_TOKENS
    num_assistant_tokens_schedule: str = ASSISTED_SCHEDULE
    assistant_confidence_threshold: float = ASSISTED_CONFIDENCE_THRESHOLD
    assistant_lookbehind: int = ASSISTED_LOOKBEHIND
    target_lookbehind: int = ASSISTED_LOOKBEHIND
