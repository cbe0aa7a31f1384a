"""Small helpers for the decoding tests."""

from __future__ import annotations

import torch


def repetitive_prompt(length: int, seed: int, vocab: int = 128) -> list[int]:
    """A prompt with repeated spans, so that prompt-as-reference n-grams exist."""
    generator = torch.Generator().manual_seed(seed)
    base = torch.randint(3, vocab, (max(1, length // 2 + 1),), generator=generator).tolist()
    return (base * 3)[:length]


def assert_trie_accepts_like_flat(flat, trie) -> None:
    """Two DecodeResults of one generation, flat and trie verification: the same acceptance step by
    step, and no trie step feeds more tokens than the flat one."""
    assert trie.tokens == flat.tokens
    assert trie.accept_lengths == flat.accept_lengths
    assert trie.step_tokens[0] == flat.step_tokens[0]  # the prefill carries no verification branch
    assert all(t <= f for t, f in zip(trie.step_tokens[1:], flat.step_tokens[1:], strict=True))


class ForwardCounter:
    """Counts forward calls of a model (to prove checks run before any forward pass)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.calls = 0
        self._handle = model.register_forward_pre_hook(self._count)

    def _count(self, *_):
        self.calls += 1

    def remove(self) -> None:
        self._handle.remove()


def no_cache_greedy(model: torch.nn.Module, prompt: list[int], new_tokens: int, stop_ids=()) -> list[int]:
    """Greedy decoding with no KV cache: each token is the argmax of one forward over the whole sequence
    (the definition of greedy that every cached and multi-token path must reproduce); ends after a stop id."""
    sequence = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            sequence.append(int(model(torch.tensor([sequence]), use_cache=False).logits[0, -1].argmax()))
            if sequence[-1] in stop_ids:
                break
    return sequence[len(prompt) :]
