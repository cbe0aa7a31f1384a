"""Model forwards on one growing KV cache, counted and timed: what every lookahead executor runs on."""

from __future__ import annotations

import torch

from lade_bench.decoding.core.executor import ForwardRecord
from lade_bench.decoding.core.kv_cache import engine_cache
from lade_bench.decoding.core.timing import Stopwatch, cache_argument_name, model_device


class CachedForward:
    """One model and its committed KV cache; ``record`` keeps each forward's input size and forward time."""

    def __init__(self, model: torch.nn.Module) -> None:
        """Forwards of ``model`` on a fresh, empty cache."""
        self.model = model
        self.device = model_device(model)
        # generate's layers, each keeping every entry (no sliding-window trimming), so all layers have
        # one length and a step's commit is the same for full and sliding layers (see kv_cache.py).
        self.cache = engine_cache(model)
        self._cache_argument = cache_argument_name(model)
        self._clock = Stopwatch(self.device)
        self.record = ForwardRecord()

    def __call__(self, ids: list[int], **kwargs) -> torch.Tensor:
        """One model forward on top of the cache; returns the kept logits, shape (rows, V).

        Without ``position_ids`` the tokens take the positions right after the cache, passed
        explicitly: ``generate`` (the AR reference) always passes them, and a model left to derive
        its own may count differently (RoBERTa-style decoders start after the padding index).
        """
        input_tensor = torch.tensor([ids], device=self.device)
        if "position_ids" not in kwargs:
            kwargs["position_ids"] = following_positions(self.cache.get_seq_length(), len(ids), self.device)
        self.record.step_tokens.append(len(ids))
        self._clock.start()
        output = self.model(input_ids=input_tensor, **{self._cache_argument: self.cache}, use_cache=True, **kwargs)
        self._clock.stop()
        self.record.forward_time_s = self._clock.total
        return output.logits[0]

    def prefill(self, ids: list[int], guesses: int) -> torch.Tensor:
        """Logits of the prefill's last ``guesses + 1`` rows; the cache keeps only the prompt's entries.

        The model builds its own (causal, and for local layers sliding-window) masks here: the
        prompt rows never see the guesses after them, so the prompt's entries are a plain prefill's.
        """
        logits = self(ids, logits_to_keep=guesses + 1)
        if guesses:
            self.cache.crop(-guesses)
        return logits


def following_positions(cached: int, count: int, device: torch.device | str) -> torch.Tensor:
    """(1, count) position ids of ``count`` tokens fed right after ``cached`` cached ones."""
    return torch.arange(cached, cached + count, device=device)[None, :]
