"""A toy drafter as a newcomer writes one (docs/adding_a_method.md): its engine and its declaration.

The warm bigram drafter remembers, across a cell's requests, the token that last followed each token in
the outputs and the prompts it saw, and drafts a chain by following those successors from cur. Its engine
is a real one on the draft-tree seam (greedy output exactly AR's); the declaration is not in
``lade_bench.methods.drafters``, so nothing registers it unless a test does (:func:`registered`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lade_bench.decoding.core.params import DecodeResult, require_int
from lade_bench.methods import register, unregister
from lade_bench.methods.drafter_method import declare_drafter
from lade_bench.runner import register_configs

NAME = "zz_bigram"


@dataclass(frozen=True)
class BigramSettings:
    """Section ``zz_bigram``: ``depth`` tokens drafted per step (>= 1)."""

    depth: int = 3

    def __post_init__(self) -> None:
        require_int(f"{NAME}.depth", self.depth, minimum=1)


class BigramState:
    """Token -> the token that last followed it; kept across a cell's requests."""

    def __init__(self) -> None:
        self.successor: dict[int, int] = {}
        self.requests_seen = 0

    def size(self) -> int:
        """Tokens whose successor is known."""
        return len(self.successor)

    def check(self, settings: BigramSettings, model: Any) -> None:
        """Any settings and model: the table does not depend on them."""


class BigramDrafter:
    """Follows the remembered successors from cur; learns every pair of the context."""

    def __init__(self, state: BigramState, settings: BigramSettings) -> None:
        self.state, self.settings = state, settings
        self.known = 0

    def propose(self, context: Sequence[int]):
        """A chain of at most ``depth`` remembered successors of cur."""
        from lade_bench.decoding.drafters.draft_tree import DraftTree

        for a, b in zip(context[max(self.known - 1, 0) : -1], context[max(self.known, 1) :], strict=True):
            self.state.successor[int(a)] = int(b)
        self.known = len(context)
        chain, token = [], int(context[-1])
        while len(chain) < self.settings.depth and token in self.state.successor:
            token = self.state.successor[token]
            chain.append(token)
        return DraftTree.from_chain(int(context[-1]), chain)

    def observe(self, step: Any) -> None:
        """Nothing: the next context carries the emitted tokens."""


def bigram_reach(settings: BigramSettings) -> Any:
    """Chains at most ``depth`` past cur, fed in order."""
    from lade_bench.decoding.drafters.draft_tree import draft_reach

    return draft_reach("bigram", settings.depth, settings.depth + 1, chains_only=True)


def bigram_generate(
    model: Any,
    input_ids: Sequence[int],
    max_new_tokens: int,
    settings: BigramSettings | None = None,
    *,
    state: BigramState | None = None,
    eos_token_id: Any = None,
    seed: int = 0,
    sampling: Any = None,
) -> DecodeResult:
    """The bigram drafter's generation on the draft-tree seam."""
    from lade_bench.decoding.drafters.draft_tree import DrafterRun, run_drafter

    settings = settings or BigramSettings()
    return run_drafter(
        model,
        input_ids,
        max_new_tokens,
        settings,
        state,
        method=NAME,
        new_state=new_bigram_state,
        start=lambda state, prompt: DrafterRun(BigramDrafter(state, settings)),
        reach=bigram_reach(settings),
        eos_token_id=eos_token_id,
        seed=seed,
        sampling=sampling,
    )


def new_bigram_state(settings: BigramSettings) -> BigramState:
    """An empty successor table."""
    return BigramState()


DRAFTER = declare_drafter(
    NAME,
    label="Bigram (toy)",
    color="#0b0b0b",
    custom_mask=False,  # chains only, fed in order
    settings=BigramSettings,
    engine=bigram_generate,
    reach=bigram_reach,
    new_state=new_bigram_state,
)


def broken_generate(
    model: Any,
    input_ids: Sequence[int],
    max_new_tokens: int,
    settings: BigramSettings | None = None,
    *,
    state: BigramState | None = None,
    eos_token_id: Any = None,
    seed: int = 0,
    sampling: Any = None,
) -> DecodeResult:
    """The bigram drafter with its fourth token changed: a broken drafter, for the grid to catch."""
    result = bigram_generate(
        model, input_ids, max_new_tokens, settings, state=state, eos_token_id=eos_token_id, seed=seed, sampling=sampling
    )
    if len(result.tokens) > 3:
        result.tokens[3] = (result.tokens[3] + 1) % 100
    return result


BROKEN = declare_drafter(
    f"{NAME}_broken",
    label="Bigram, broken (toy)",
    color="#0b0b0d",
    custom_mask=False,
    settings=BigramSettings,
    engine=broken_generate,
    reach=bigram_reach,
    new_state=new_bigram_state,
)


@contextmanager
def registered(declared: Any = DRAFTER) -> Iterator[str]:
    """A toy drafter (the working one unless told) registered (last in every table) with its config section in
    the schema, then removed."""
    register(declared.method)
    register_configs()
    try:
        yield declared.name
    finally:
        unregister(declared.name)
        register_configs()
