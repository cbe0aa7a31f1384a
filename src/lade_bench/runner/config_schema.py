"""Structured-config schemas: Hydra checks every key and type against these at composition time.

One top-level schema (:func:`run_schema`: :class:`LadeBenchConfig` plus the config section each
registered method declares with its entry, ``Method.config``) whose fields are the group schemas. It
is stored in Hydra's ConfigStore under :data:`SCHEMA_NAME` and is the first entry of ``conf/config.yaml``'s
defaults list, so every option of every group is merged onto its typed node: ``lookahead.windw=3``
fails with "Key 'windw' not in 'LookaheadConfig'" and ``lookahead.window=abc`` with "Value 'abc' ...
could not be converted to Integer", before anything runs. The group schemas are not stored inside
their groups because Hydra would then list them as selectable options (``model=ModelConfig``).

Closed vocabularies (model source, device, dtype, attention, step path) are Enums so a wrong word fails
at composition too, listing the allowed words. Arms are the exception: they are the names of the
method registry (``lade_bench.methods``), which grows at run time (a test's toy method, a new arm),
so ``arms`` is a list of strings that the plan checks against the registry before any model loads.
Range checks (N >= 2, temperature > 0, ...) are the decoding package's own
(``LookaheadParams``/``SamplingParams``) and run at the start of a cell, before any model loads.
Each default is stated once: the run's settings in ``conf/settings.yaml`` (with the comments that
say why), so their fields here are ``MISSING`` (types only); the engine's settings (N, W, G,
sampling) in ``lade_bench.decoding.core.params``, which the fields here read, so the group files state
only what differs; a method's own section in the dataclass its registry entry names (its defaults
there, nowhere else: a new method touches neither this module nor ``conf/``). ``conf`` is the
top-level ``conf/`` (the package ``lade_bench.conf``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from lade_bench.conf import register_resolvers
from lade_bench.decoding.core.params import LookaheadParams, SamplingParams
from lade_bench.model_config import ModelConfig

SCHEMA_NAME = "lade_bench_schema"


class Device(Enum):
    """Device names the runner accepts (``auto``: CUDA when available, else CPU)."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class DType(Enum):
    """Weight dtypes (``auto``: float16 on CUDA as in the paper, float32 on CPU)."""

    auto = "auto"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"
    float64 = "float64"


class AttnImplementation(Enum):
    """transformers attention backends; lookahead needs one that takes its custom step mask.

    eager and sdpa take it as a 4D float mask, flex_attention as a BlockMask (fused, block-sparse;
    compiled on first use); flash_attention_2 takes no custom mask and serves AR-only runs.
    """

    sdpa = "sdpa"
    eager = "eager"
    flex_attention = "flex_attention"
    flash_attention_2 = "flash_attention_2"


class StepPath(Enum):
    """How a cell's forwards compute their rows (``lade_bench.decoding.core.params.STEP_PATHS``).

    standard runs the model's own kernels; batch_invariant (``decoding.core.batch_invariant``) makes
    every row bit-identical however many rows share the forward, so every method's greedy output equals
    AR's in bfloat16 on the CPU (issue 68).
    """

    standard = "standard"
    batch_invariant = "batch_invariant"


@dataclass
class DatasetConfig:
    """Schema of the ``dataset`` group.

    Attributes:
        name: registry key (see ``lade_bench.datasets.available_datasets``).
        split: split of the default source; null: the benchmark split.
        path: local file in the upstream schema, read instead of the wheel or hub.
        limit: keep the first ``limit`` samples (after the optional shuffle); null: all.
        shuffle_seed: null keeps file order; an int draws a fixed random subset with ``limit``.
        offset: drop the first ``offset`` samples (after the shuffle, before ``limit``): an evaluation
            then excludes the samples a tuner saw (the first probe + held-out ones of the same draw).
        max_prompt_tokens: skip samples with longer prompts; null: derived from the model's context.
        categories: for a dataset with categories (spec_bench), the groups or categories kept; null: all.
        per_category_limit: for such a dataset, the most samples per group; null: no cap.
    """

    name: str = MISSING
    split: str | None = None
    path: str | None = None
    limit: int | None = MISSING
    shuffle_seed: int | None = None
    offset: int = MISSING
    max_prompt_tokens: int | None = None
    categories: list[str] | None = None
    per_category_limit: int | None = None


@dataclass
class LookaheadConfig:
    """Schema of the ``lookahead`` group: N, W, G, prompt-as-reference and the verification layout
    (``flat`` or ``trie``; see ``LookaheadParams``, which validates it)."""

    ngram: int = LookaheadParams.ngram
    window: int = LookaheadParams.window
    guesses: int = LookaheadParams.guesses
    prompt_as_reference: bool = LookaheadParams.prompt_as_reference
    verification: str = LookaheadParams.verification
    # One device unless a preset or the command line spreads a step over ranks (a launch setting).
    devices: int = 1


@dataclass
class DistributedConfig:
    """Schema of ``distributed``: settings of multi-rank cells (``lookahead.devices`` > 1, under torchrun).

    Attributes:
        timeout_s: how long a rank waits in a collective before failing (a rank that exits is noticed
            at once on gloo; this bounds the wait for one that hangs).
    """

    timeout_s: float = MISSING


@dataclass
class SamplingConfig:
    """Schema of the ``sampling`` group (see ``SamplingParams``); ``name`` labels the preset."""

    name: str = MISSING
    do_sample: bool = SamplingParams.do_sample
    temperature: float = SamplingParams.temperature
    top_k: int = SamplingParams.top_k
    top_p: float = SamplingParams.top_p


class StateMode(Enum):
    """How a cell carries the state of methods that learn across requests (``lade_bench.methods.state``)."""

    warm = "warm"
    cold = "cold"


@dataclass
class MethodStateConfig:
    """Schema of ``method_state``: warm (carried across a cell's samples) or cold (a fresh state per sample).

    Attributes:
        mode: warm or cold.
        scope: how far a warm state reaches, one of ``lade_bench.methods.state.STATE_SCOPES`` (a string,
            checked by the plan with the dataset it needs): ``cell`` or ``benchmark`` (Spec-Bench's).
    """

    mode: StateMode = MISSING
    scope: str = MISSING


@dataclass
class MismatchConfig:
    """Schema of ``mismatch``: how a greedy output that differs from AR is judged (``runner.mismatch``).

    Attributes:
        margin_tolerance: in logits. At the first position where a greedy row leaves its AR pair, a
            token more than this below AR's token (one reference forward) is an engine error, not
            half-precision noise at a near-tie. Not part of the cell id (it changes no token).
    """

    margin_tolerance: float = MISSING


@dataclass
class CompileOptionsConfig:
    """Schema of ``compile_options``: how a compiled cell (``compile=true``) compiles its forwards.

    Attributes:
        mode: a ``torch.compile`` mode, one of ``lade_bench.decoding.core.compiled.COMPILE_MODES`` (a
            string, checked by the plan, since that tuple is the engine's); ``auto`` resolves per device.
        cache_block: static KV-cache lengths are rounded up to a multiple of this (>= 1).
        backend: ``torch.compile``'s backend, one of ``lade_bench.decoding.core.compiled.COMPILE_BACKENDS``.
    """

    mode: str = MISSING
    backend: str = MISSING
    cache_block: int = MISSING


class WandbMode(Enum):
    """Where W&B runs go: files on disk to sync later, the live service, or nowhere."""

    offline = "offline"
    online = "online"
    disabled = "disabled"


@dataclass
class WandbConfig:
    """Schema of ``wandb``: one W&B run per cell (see ``lade_bench.report.wandb_sink.WandbSettings``)."""

    mode: WandbMode = MISSING
    project: str = MISSING
    entity: str | None = MISSING
    dir: str | None = MISSING
    tags: list[str] = MISSING
    log_table: bool = MISSING
    log_figures: bool = MISSING
    n_boot: int = MISSING


@dataclass
class DeviceProfileConfig:
    """Schema of ``device_profile``: the forward-time-vs-tokens curve measured once per sweep and profile key."""

    enabled: bool = MISSING
    context_tokens: int = MISSING
    kv_lengths: list[int] = MISSING
    warmup: int = MISSING
    repeats: int = MISSING


@dataclass
class HeadlineConfig:
    """A lookahead configuration declared as a sweep's headline before it runs (see ``ReportConfig``)."""

    ngram: int = MISSING
    window: int = MISSING
    guesses: int = MISSING
    prompt_as_reference: bool = MISSING
    verification: str = "flat"


@dataclass
class ReportConfig:
    """Schema of ``report``: settings the report reads back from each cell's ``config.yaml``.

    Attributes:
        headline: the configuration the main table reports for this sweep (per model and dataset),
            declared in advance so it is not picked on the samples it reports; null: none declared
            (``lade_bench.stats.choose_headline`` then selects on half of the samples).
    """

    headline: HeadlineConfig | None = MISSING


@dataclass
class SandboxConfig:
    """Schema of ``sandbox``: how generated code (HumanEval, MBPP, ClassEval answers) may run."""

    allow_unsandboxed: bool = MISSING


class WhenOwned(Enum):
    """What a job does with a cell that another live job is running (see ``lade_bench.runner.locks``)."""

    skip = "skip"
    wait = "wait"


@dataclass
class CellLockConfig:
    """Schema of ``cell_lock``: one job per cell when many jobs write one sweep.

    Attributes:
        heartbeat_s: seconds between two refreshes of the lock a running cell holds.
        stale_after_s: a lock not refreshed for this long is taken over (its owner is presumed dead).
        when_owned: skip a cell another live job runs, or wait for it.
    """

    heartbeat_s: float = MISSING
    stale_after_s: float = MISSING
    when_owned: WhenOwned = MISSING


@dataclass
class LadeBenchConfig:
    """The whole job config; ``conf/config.yaml`` documents each value and its default."""

    model: ModelConfig = field(default_factory=ModelConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    lookahead: LookaheadConfig = field(default_factory=LookaheadConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    method_state: MethodStateConfig = field(default_factory=MethodStateConfig)
    mismatch: MismatchConfig = field(default_factory=MismatchConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    device_profile: DeviceProfileConfig = field(default_factory=DeviceProfileConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    cell_lock: CellLockConfig = field(default_factory=CellLockConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    compile_options: CompileOptionsConfig = field(default_factory=CompileOptionsConfig)
    # Names in lade_bench.methods; checked by the plan (an Enum could not grow with the registry).
    arms: list[str] = MISSING
    seed: int = MISSING
    max_new_tokens: int = MISSING
    warmup: int = MISSING
    warmup_new_tokens: int = MISSING
    repeats: int = MISSING
    device: Device = MISSING
    dtype: DType = MISSING
    attn_implementation: AttnImplementation = MISSING
    step_path: StepPath = MISSING
    # Eager (false) or compiled (true) forwards for every arm of the cell (see compile_options).
    compile: bool = MISSING
    output_root: str = MISSING
    sweep_name: str = MISSING
    model_cache_dir: str = MISSING


def run_schema(base: type = LadeBenchConfig) -> type:
    """``base`` plus a field ``<name>: <Method.config>`` per registered method that declares a section.

    Built when the configs are registered, so a method registered before then (a built-in, a test's
    toy method, your own module) brings its section without an edit here.

    Raises:
        ValueError: a method's section would replace a run setting of ``base`` (same name).
    """
    from lade_bench.methods.registry import method_config_sections

    sections = method_config_sections()
    taken = sorted(set(sections) & {f.name for f in dataclasses.fields(base)})
    if taken:
        raise ValueError(f"methods {taken} declare a config section named like a run setting; rename the method")
    fields = [(name, schema, field(default_factory=schema)) for name, schema in sections.items()]
    schema = dataclasses.make_dataclass(base.__name__, fields, bases=(base,))
    schema.__module__ = base.__module__  # where its name is found (make_dataclass's module= needs 3.12)
    return schema


def register_configs() -> None:
    """Store the schema (:func:`run_schema`) in Hydra's ConfigStore and register the configs' resolvers;
    call before Hydra composes, after any method of your own is registered (idempotent)."""
    register_resolvers()
    ConfigStore.instance().store(name=SCHEMA_NAME, node=run_schema())
