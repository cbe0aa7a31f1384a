"""Arms with a compiled mode for the runner's tests of ``compile=true``, without the engine's compiler.

The runner's part of a compiled cell is plumbing: one ``CompiledForwards`` per cell, handed to every
arm's ``GenerationRequest.compiled`` (warm-up included), its ``compile_time_s`` reaching the rows.
:func:`compiled_arms` registers, for one test, the built-in ar, lookahead and prompt_lookup with
``compiles=True`` and a generate that runs the same eager engine through the cell's real
``CompiledForwards.run`` (an untimed first run for each shape not seen yet, its wall time reported as
``compile_time_s``), and records which ``CompiledForwards`` each generation got. ``torch.compile``
itself is the engine's, tested beside it (it takes minutes on this CPU).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from lade_bench.methods import GenerationRequest, Method, get_method, register

COMPILING = ("ar", "lookahead", "prompt_lookup")


@dataclass
class CompiledArms:
    """What the registered arms saw: ``(arm, request.compiled)`` per generation, in call order."""

    received: list[tuple[str, Any]] = field(default_factory=list)

    def wrap(self, method: Method) -> Method:
        """``method`` with a compiled mode: its eager generate, through the request's CompiledForwards."""

        def generate(request: GenerationRequest) -> Any:
            self.received.append((method.name, request.compiled))
            if request.compiled is None:  # an eager cell: the method as registered
                return method.generate(request)
            eager = replace(request, compiled=None)
            device = next(request.model.parameters()).device
            # The static cache length decides the shapes a compiled generation runs (the engine's key).
            length = request.compiled.cache_length(len(request.prompt_ids) + request.max_new_tokens)
            return request.compiled.run((method.name, length), device, lambda: method.generate(eager))

        return replace(method, generate=generate, compiles=True)


@contextlib.contextmanager
def compiled_arms() -> Iterator[CompiledArms]:
    """Register ar, lookahead and prompt_lookup with a compiled mode (see the module); restore them after."""
    originals = [get_method(name) for name in COMPILING]
    arms = CompiledArms()
    for method in originals:
        register(arms.wrap(method), replace=True)  # same name: same place in the reading order
    try:
        yield arms
    finally:
        for method in originals:
            register(method, replace=True)
