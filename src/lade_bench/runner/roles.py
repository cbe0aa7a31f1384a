"""Model roles: one registry entry per role a method can run (``Method.models``), with its loader.

A cell loads, on each rank, every role that an arm running on that rank needs: rank 0 (or a
single-device cell) runs every arm; the other ranks of a multi-device cell run only the arms with
``Method.every_rank``, and never load a role marked ``leader_only``. Roles load in registration
order, the full model (``REPLICA``) first: its loader also sets the cell's tokenizer and stop ids,
which the roles after it read (the draft is paired with the target's tokenizer). A new role is one
:func:`register_role` entry here (and its name in ``lade_bench.methods.registry``); the cell, the
ranks and the tuner read the entries and list no role themselves (``docs/adding_a_method.md`` §4).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lade_bench.decoding import DecodingConfigError
from lade_bench.decoding.baselines.assisted import pair_draft
from lade_bench.decoding.core import batch_invariant
from lade_bench.decoding.core.params import BATCH_INVARIANT_STEP_PATH
from lade_bench.decoding.model_checks.support import check_model_support
from lade_bench.methods import DRAFT, PIPELINE_PARALLEL, REPLICA, TENSOR_PARALLEL, get_method
from lade_bench.models.loading import TensorParallelError, load_model, load_tensor_parallel, stop_token_ids
from lade_bench.models.pipeline import PipelineParallelError, load_pipeline_parallel
from lade_bench.runner.cell_model import CellModel
from lade_bench.runner.plan import CellConfigError, CellPlan
from lade_bench.runner.ranks import Ranks

log = logging.getLogger(__name__)

Loader = Callable[[CellPlan, CellModel, "Ranks | None"], Any]


@dataclass(frozen=True)
class ModelRole:
    """One model role and how a cell loads it.

    Attributes:
        name: the role's name, as ``Method.models`` lists it (``lade_bench.methods.registry``).
        load: ``load(plan, cell_model, ranks) -> the role's object`` on this rank; ``cell_model``
            holds the roles loaded before it (the replica first). Raises ``CellConfigError`` with what
            to change when the role cannot load.
        leader_only: only rank 0 loads it (it lives in rank 0's process); False: every rank whose
            arms need it does.
    """

    name: str
    load: Loader
    leader_only: bool = False


_ROLES: dict[str, ModelRole] = {}


def register_role(role: ModelRole, *, replace: bool = False) -> ModelRole:
    """Add ``role`` (loaded after the roles registered before it) and return it.

    Raises:
        ValueError: the name is registered already (unless ``replace``).
    """
    if role.name in _ROLES and not replace:
        raise ValueError(f"model role {role.name!r} is already registered; pass replace=True to redefine it")
    _ROLES[role.name] = role
    return role


def unregister_role(name: str) -> None:
    """Remove a role (a test's toy role); unknown names are ignored."""
    _ROLES.pop(name, None)


def role_names() -> tuple[str, ...]:
    """Registered role names in loading order."""
    return tuple(_ROLES)


def models_needed(plan: CellPlan, followers: bool = False) -> set[str]:
    """Model roles the plan's arms run; ``followers``: only those of arms that run on every rank."""
    methods = [get_method(arm) for arm in plan.arms]
    return {role for m in methods if m.every_rank or not followers for role in m.models}


def roles_to_load(plan: CellPlan, ranks: Ranks | None) -> list[ModelRole]:
    """The roles this rank loads for ``plan``, in loading order.

    Raises:
        CellConfigError: an arm runs a role no entry loads (the message lists the registered roles).
    """
    leader = ranks is None or ranks.is_leader
    needed = models_needed(plan, followers=not leader)
    unknown = sorted(needed - set(_ROLES))
    if unknown:
        raise CellConfigError(
            f"the arms {list(plan.arms)} run the model role {unknown[0]!r}, which no loader is registered for; "
            f"registered roles: {list(_ROLES)} (lade_bench.runner.roles.register_role)"
        )
    return [role for name, role in _ROLES.items() if name in needed and (leader or not role.leader_only)]


def load_roles(plan: CellPlan, cell_model: CellModel, ranks: Ranks | None, roles: list[ModelRole]) -> CellModel:
    """Load each of ``roles`` into ``cell_model.models`` (in order) and return ``cell_model``."""
    for role in roles:
        cell_model.models[role.name] = role.load(plan, cell_model, ranks)
    return cell_model


def _load_replica(plan: CellPlan, cell_model: CellModel, ranks: Ranks | None) -> Any:
    """The full model on this rank's device; sets the cell's tokenizer and stop ids."""
    choice = plan.model
    log.info("loading model %s (%s, %s)", choice.name, plan.device, str(plan.dtype).removeprefix("torch."))
    attention = plan.facts.attn_implementation
    try:
        model, tokenizer = load_model(choice.section, plan.device, plan.dtype, attention, cache_dir=choice.cache_dir)
    except OSError as err:  # hub unreachable, gated repo, missing folder
        raise CellConfigError(
            f"cannot load model {choice.name!r}: {err}\nWithout hub access, point model.name_or_path at a "
            "local copy, or use the embedded model: model=smollm2"
        ) from err
    if plan.step_path == BATCH_INVARIANT_STEP_PATH:
        # Before the support checks (their probe then runs the attention every arm will) and before any
        # row is timed. The draft (assisted) stays standard: the target verifies every token it proposes.
        cell_model.invariance = enable_batch_invariant(model, choice.name)
    checked = [method for method in map(get_method, plan.arms) if method.model_checks]
    if checked:
        # Refuse an unsupported model (ALiBi, chunked attention, FlashAttention, a failed probe) now,
        # not after the device profile and the first AR generations.
        check_model_support(model, custom_mask=any(method.custom_mask for method in checked))
    if choice.chat and getattr(tokenizer, "chat_template", None) is None:
        raise CellConfigError(
            f"model {choice.name!r} has no chat template: set model.chat_template, or model.chat=false "
            "for plain completion prompts"
        )
    cell_model.tokenizer = tokenizer
    cell_model.stop_ids = stop_token_ids(model, tokenizer)
    return model


def enable_batch_invariant(model: Any, name: str) -> Any:
    """Put ``model`` on the batch-invariant step path; its check's report (``InvarianceReport``).

    Raises:
        CellConfigError: the check found a row that differs on this device (its message names it).
    """
    log.info("checking and enabling the batch-invariant step path on %s", name)
    try:
        return batch_invariant.enable(model)
    except batch_invariant.BatchInvarianceError as err:
        raise CellConfigError(f"model {name!r}: {err}") from err


def _load_tensor_parallel(plan: CellPlan, cell_model: CellModel, ranks: Ranks | None) -> Any:
    """This rank's tensor-parallel shard (transformers' ``tp_plan``) over every rank."""
    choice = plan.model
    if ranks is None:
        raise CellConfigError("the tensor-parallel role needs ranks under torchrun (lookahead.devices >= 2)")
    log.info("loading the tensor-parallel shard of %s (rank %d of %d)", choice.name, ranks.rank, ranks.world_size)
    attention = plan.facts.attn_implementation
    try:
        return load_tensor_parallel(choice.section, plan.dtype, attention, ranks.world_size, cache_dir=choice.cache_dir)
    except TensorParallelError as err:
        raise CellConfigError(f"the ar_tp arm cannot run: {err}") from err


def _load_draft(plan: CellPlan, cell_model: CellModel, ranks: Ranks | None) -> Any:
    """The assisted arm's draft on the replica's device, in its dtype, paired with the target."""
    draft_cfg = plan.settings["assistant"].model
    log.info("loading the draft model %s (%s)", draft_cfg.name, plan.device)
    attention = plan.facts.attn_implementation
    try:
        draft, draft_tokenizer = load_model(
            draft_cfg, plan.device, plan.dtype, attention, cache_dir=plan.model.cache_dir
        )
    except OSError as err:  # hub unreachable, gated repo, missing folder
        raise CellConfigError(
            f"cannot load the draft model {draft_cfg.name!r} (assistant.model): {err}\nWithout hub access, point "
            "assistant.model.name_or_path at a local copy, or pick an embedded or tiny draft"
        ) from err
    assert cell_model.model is not None  # the replica loads first, on rank 0 always
    try:
        paired = pair_draft(cell_model.model, draft, cell_model.tokenizer, draft_tokenizer)
    except DecodingConfigError as err:
        raise CellConfigError(f"the assisted arm cannot run with draft {draft_cfg.name!r}: {err}") from err
    if paired.universal:
        log.info("the draft's vocabulary differs from the target's: universal assisted decoding")
        if plan.sampling.do_sample:
            raise CellConfigError(
                f"the assisted arm with draft {draft_cfg.name!r} (another tokenizer: universal assisted "
                "decoding) is greedy-only here; use sampling=greedy, or a draft with the target's tokenizer"
            )
    return paired


def _load_pipeline(plan: CellPlan, cell_model: CellModel, ranks: Ranks | None) -> Any:
    """The full model with its layers split over cuda:0..K-1 (K: the cell's devices), in rank 0's process."""
    choice = plan.model
    log.info("loading %s split over %d devices (pipeline-parallel AR)", choice.name, plan.devices)
    attention = plan.facts.attn_implementation
    try:
        return load_pipeline_parallel(choice.section, plan.devices, plan.dtype, attention, cache_dir=choice.cache_dir)
    except PipelineParallelError as err:
        raise CellConfigError(f"the ar_pp arm cannot run: {err}") from err


register_role(ModelRole(REPLICA, _load_replica))
register_role(ModelRole(TENSOR_PARALLEL, _load_tensor_parallel))
register_role(ModelRole(DRAFT, _load_draft, leader_only=True))
register_role(ModelRole(PIPELINE_PARALLEL, _load_pipeline, leader_only=True))
