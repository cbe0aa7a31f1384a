"""The compiled mode of a cell: static KV caches, compiled forwards, compile time kept out of the timings.

Eager ``generate`` spends most of a one-token step outside arithmetic (kernel launches on a GPU,
per-op framework overhead on a CPU), which flatters any method that amortises that overhead over
many tokens. The compiled mode is the strong baseline: every forward runs on a static KV cache (fixed
tensor shapes) through ``torch.compile`` (CUDA graphs on a GPU with ``mode="reduce-overhead"``).

One :class:`CompiledForwards` lives for one cell and is shared by its arms; creating one drops
every graph compiled before it in the process (``torch._dynamo.reset``). It

* rounds each generation's cache length up to a multiple of ``cache_block``, so a cell compiles a
  handful of shapes rather than one per prompt length;
* keeps each model's compiled step forwards (``static_step.py``) for the life of the cell;
* runs a generation whose shapes it has not seen yet once untimed first (that run pays the compile
  and, on a GPU, the CUDA-graph capture), then again for the timing, and reports the untimed run's
  wall time as ``stats["compile_time_s"]``: compile time is reported, never timed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from lade_bench.decoding.core.params import DecodeResult, DecodingConfigError, require_int

# torch.compile modes the switch accepts; "auto" is reduce-overhead (CUDA graphs) on CUDA, "default"
# elsewhere (CUDA graphs exist only on CUDA).
COMPILE_MODES = ("auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

COMPILE_BACKENDS = ("inductor", "eager")

# Untimed runs of a generation with unseen shapes: one compiles; CUDA graph trees record a graph on
# the run after the warm-up one, so a GPU in a graph mode needs a second before the timed run.
_FIRST_SIGHT_RUNS = {"default": 1, "max-autotune-no-cudagraphs": 1, "reduce-overhead": 2, "max-autotune": 2}


# Compiled graphs one compiled function may hold in a cell: each (method, step shape, cache length) is
# one; torch's default of 8 would be reached by a cell with several cache lengths.
_RECOMPILE_LIMIT = 64


@contextlib.contextmanager
def recompiles_allowed() -> Iterator[None]:
    """Scope in which compiled calls may compile up to ``_RECOMPILE_LIMIT`` shapes, and fail past it.

    Past torch's limit dynamo silently falls back to eager, which would time an "eager" arm under a
    compiled label; failing instead keeps the mode a row reports true.
    """
    import torch._dynamo

    with torch._dynamo.config.patch(recompile_limit=_RECOMPILE_LIMIT, fail_on_recompile_limit_hit=True):
        yield


def resolve_compile_mode(mode: str, device: torch.device) -> str:
    """The torch.compile mode ``mode`` means on ``device`` (``auto``: CUDA graphs on CUDA only).

    Raises:
        DecodingConfigError: an unknown mode (the message lists the allowed ones), or a CUDA-graph
            mode on a device without CUDA graphs.
    """
    if mode not in COMPILE_MODES:
        raise DecodingConfigError(f"compile mode {mode!r} is not one of {list(COMPILE_MODES)}")
    if mode == "auto":
        return "reduce-overhead" if device.type == "cuda" else "default"
    if mode in ("reduce-overhead", "max-autotune") and device.type != "cuda":
        raise DecodingConfigError(
            f"compile mode {mode!r} captures CUDA graphs, which {device.type} has not; "
            "use 'auto', 'default' or 'max-autotune-no-cudagraphs'"
        )
    return mode


# Attention implementations the static-shape step runs on: they take its 4D float mask.
STATIC_SHAPE_ATTENTION = ("sdpa", "eager")


def check_static_shape_support(model: torch.nn.Module, parallel: Any = None) -> None:
    """Refuse what the static-shape compiled step cannot run: several ranks, or a mask-less backend.

    Raises:
        DecodingConfigError: naming the problem and what is allowed.
    """
    if parallel is not None and getattr(parallel, "world_size", 1) > 1:
        raise DecodingConfigError("the compiled mode runs on one device; lookahead parallelism (devices > 1) is eager")
    implementation = getattr(model.config, "_attn_implementation", None)
    if implementation not in STATIC_SHAPE_ATTENTION:
        raise DecodingConfigError(
            f"the compiled mode's static-shape step needs attn_implementation in {list(STATIC_SHAPE_ATTENTION)}, "
            f"not {implementation!r} (flex_attention compiles its own kernels; flash_attention_2 takes no custom mask)"
        )


@dataclass
class CompiledForwards:
    """One cell's compiled mode, shared by its arms (see the module docstring).

    Attributes:
        mode: a value of ``COMPILE_MODES``.
        cache_block: static cache lengths are rounded up to a multiple of this (>= 1).
        backend: torch.compile's backend: ``inductor`` (generated kernels: the measured mode) or
            ``eager`` (dynamo captures the same static-shape graphs and runs them with eager kernels:
            what the CPU tests use to check the static-shape paths without paying inductor's compile).
    """

    mode: str = "auto"
    cache_block: int = 256
    backend: str = "inductor"
    _seen: set[Hashable] = field(default_factory=set, repr=False)
    _compiled: dict[tuple[int, str], Callable[..., Any]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # Dynamo keeps compiled code per code object for the whole process: every model of one class
        # shares ``forward``'s entries, so the graphs of earlier cells (other instances, other shapes)
        # would count toward the recompile limit of this one. A cell's compiled mode starts empty.
        import torch._dynamo

        torch._dynamo.reset()
        if self.mode not in COMPILE_MODES:
            raise DecodingConfigError(f"compile mode {self.mode!r} is not one of {list(COMPILE_MODES)}")
        require_int("compile cache_block", self.cache_block, minimum=1)
        if self.backend not in COMPILE_BACKENDS:
            raise DecodingConfigError(f"compile backend {self.backend!r} is not one of {list(COMPILE_BACKENDS)}")

    def mode_on(self, device: torch.device) -> str:
        """The torch.compile mode on ``device`` (``resolve_compile_mode``)."""
        return resolve_compile_mode(self.mode, device)

    def cache_length(self, needed: int) -> int:
        """The static cache length for a generation that needs ``needed`` positions (rounded up)."""
        return -(-needed // self.cache_block) * self.cache_block

    def compiled_forward(self, model: torch.nn.Module, purpose: str) -> Callable[..., Any]:
        """``model.forward`` compiled for ``purpose`` (one compiled function per model and purpose).

        Static shapes (``dynamic=False``): every call of one purpose and cache length has the same
        input shapes, so each shape compiles once and, in a CUDA-graph mode, replays as a graph.
        """
        key = (id(model), purpose)
        forward = self._compiled.get(key)
        if forward is None:
            device = next(model.parameters()).device
            # The eager backend takes no mode.
            mode = self.mode_on(device) if self.backend == "inductor" else None
            forward = torch.compile(model.forward, backend=self.backend, mode=mode, dynamic=False, fullgraph=False)
            self._compiled[key] = forward
        return forward

    def run(self, shape_key: Hashable, device: torch.device, generation: Callable[[], DecodeResult]) -> DecodeResult:
        """``generation()`` timed without its compile: untimed first when ``shape_key`` is new.

        ``generation`` must be repeatable (same seed, same result): the runs before the timed one
        only compile and capture. Every run is inside :func:`recompiles_allowed`. Returns the timed
        run's result with ``stats["compile_time_s"]``, the untimed runs' wall time (0.0 when the
        shapes were compiled already).
        """
        compile_time = 0.0
        with recompiles_allowed():
            if shape_key not in self._seen:
                for _ in range(_FIRST_SIGHT_RUNS[self.mode_on(device)]):
                    started = time.perf_counter()
                    generation()
                    compile_time += time.perf_counter() - started
                self._seen.add(shape_key)
            result = generation()
        result.stats["compile_time_s"] = compile_time
        return result
