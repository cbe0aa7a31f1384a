"""The n-gram pool: first token -> the most recent distinct continuations, capped per key."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class NGramPool:
    """Maps a token to at most ``cap`` continuations of ``length`` tokens each.

    Re-inserting a continuation moves it to the most-recent end; overflow evicts the oldest. Lookups
    return the most recent first, so ties in verification go to the freshest guess.
    """

    def __init__(self, length: int, cap: int) -> None:
        """Create an empty pool of ``length``-token continuations, ``cap`` per key (0 stores nothing)."""
        self.length = length
        self.cap = cap
        self._entries: dict[int, OrderedDict[tuple[int, ...], None]] = {}

    def add(self, key: int, continuation: Sequence[int]) -> None:
        """Insert (or refresh) one continuation of ``key``."""
        if self.cap == 0:
            return
        value = tuple(continuation)
        if len(value) != self.length:
            raise ValueError(f"continuation has {len(value)} tokens, the pool holds {self.length}-token ones")
        bucket = self._entries.get(key)
        if bucket is None:
            bucket = self._entries[key] = OrderedDict()
        elif value in bucket:
            bucket.move_to_end(value)
            return
        bucket[value] = None
        if len(bucket) > self.cap:
            bucket.popitem(last=False)

    def add_ngrams_of(self, tokens: Sequence[int], first_end: int = 0) -> None:
        """Insert every n-gram (key + continuation) of ``tokens`` whose last index is >= ``first_end``.

        Used both to seed the pool from the prompt and to feed accepted output back in: passing the
        index of the first new token adds exactly the n-grams that the new tokens completed.
        """
        n = self.length + 1
        for end in range(max(first_end, n - 1), len(tokens)):
            start = end - n + 1
            self.add(tokens[start], tokens[start + 1 : end + 1])

    def candidates(self, key: int) -> list[tuple[int, ...]]:
        """Continuations of ``key``, most recent first (at most ``cap``)."""
        bucket = self._entries.get(key)
        if not bucket:
            return []
        return list(reversed(bucket))

    def __len__(self) -> int:
        """Number of stored continuations over all keys."""
        return sum(len(b) for b in self._entries.values())
