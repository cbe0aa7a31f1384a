"""The single-device executor: a whole lookahead step in one forward pass under one custom mask."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lade_bench.decoding.core.branch import BRANCH_BUILDERS, VerificationBranch
from lade_bench.decoding.core.checks import attention_implementation_of, layer_attention_of
from lade_bench.decoding.core.executor import StepInput, StepOutput
from lade_bench.decoding.core.forward import CachedForward
from lade_bench.decoding.core.kv_cache import commit_accepted
from lade_bench.decoding.core.layout import LayoutCache, StepLayout
from lade_bench.decoding.core.masks import StepMasks
from lade_bench.decoding.core.timing import model_dtype


@dataclass(frozen=True)
class SingleDeviceStep(StepOutput):
    """A single-device step's output plus where its tokens sat in the step input.

    Attributes:
        layout: the step's layout (input size, where the branch starts).
        branch: the verification branch fed (each candidate's path of branch indices).
    """

    layout: StepLayout
    branch: VerificationBranch

    @classmethod
    def from_logits(
        cls, logits: torch.Tensor, layout: StepLayout, branch: VerificationBranch, with_logits: bool
    ) -> SingleDeviceStep:
        """The step's output from the logits of ``layout.logit_rows``, in that order."""
        predictions = logits.argmax(dim=-1).tolist()
        last_level = [predictions[r] for r in layout.last_level_rows]
        kept_logits = logits if with_logits else None
        return cls(predictions, last_level, layout.candidate_rows, kept_logits, layout, branch)

    def kept_offsets(self, winner: int, matched: int) -> list[int]:
        """Step-input offsets (past cur) of the accepted tokens: candidate ``winner``'s first ``matched``."""
        # The accepted tokens' nodes (winner is -1 when nothing matched, possibly with no branch).
        accepted_nodes = self.branch.paths[winner][:matched] if matched else ()
        return [self.layout.candidate_offset + node for node in accepted_nodes]


class SingleDeviceExecutor:
    """Runs every forward of a lookahead generation on the model's own device (a ``StepExecutor``)."""

    def __init__(self, model: torch.nn.Module, verification: str, with_logits: bool) -> None:
        """Steps of ``model`` with the ``verification`` branch layout (flat or trie).

        ``with_logits``: return each step's logits too (sampling verification reads them).
        """
        self._forward = CachedForward(model)
        self.record = self._forward.record
        device = self._forward.device
        self._layouts = LayoutCache(model_dtype(model), device)
        self._masks = StepMasks(layer_attention_of(model), device, attention_implementation_of(model))
        self._branch_of = BRANCH_BUILDERS[verification]
        self._with_logits = with_logits

    def prefill(self, ids: list[int], guesses: int) -> torch.Tensor:
        """The prompt and ``guesses`` window guesses in one causal forward; only the prompt stays cached."""
        return self._forward.prefill(ids, guesses)

    def step(self, inputs: StepInput) -> SingleDeviceStep:
        """One forward pass of the whole step: window and the verification branch under one mask."""
        branch = self._branch_of(inputs.candidates, inputs.window_tokens[0])
        layout = self._layouts.get(inputs.levels, inputs.columns, branch)
        logits = self._forward(
            [*inputs.window_tokens, *branch.tokens],
            attention_mask=self._masks.build(layout, inputs.position),
            position_ids=(layout.position_offsets + inputs.position)[None, :],
            logits_to_keep=layout.logit_rows,
        )
        return SingleDeviceStep.from_logits(logits, layout, branch, self._with_logits)

    def commit(self, output: SingleDeviceStep, position: int, winner: int, matched: int) -> None:
        """Keep cur's and the ``matched`` accepted tokens of candidate ``winner``'s cache entries."""
        kept = output.kept_offsets(winner, matched)
        commit_accepted(self._forward.cache, position, output.layout.num_tokens, kept)
