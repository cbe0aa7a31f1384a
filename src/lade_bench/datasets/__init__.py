"""Benchmarks as task specs in a registry, plus prompt rendering (chat template or raw completion).

Each dataset module declares one ``DatasetSpec`` (loader, prompt, scorer or ``Unscored``, whether
it runs code, its config file); see ``docs/adding_a_dataset.md``. Typical use::

    samples = load_dataset_samples("mt_bench", limit=10)
    ids = render_prompt(tokenizer, samples[0], 0, [], chat=True)
"""

from lade_bench.datasets._sources import DatasetFormatError, DatasetUnavailableError
from lade_bench.datasets.code_answer import CodeAnswer
from lade_bench.datasets.gsm8k import extract_gold_number
from lade_bench.datasets.prompts import (
    build_messages,
    completion_text,
    filter_by_prompt_length,
    render_prompt,
)
from lade_bench.datasets.registry import (
    DEFAULT_CONF_DIR,
    UnknownDatasetError,
    available_datasets,
    category_selection,
    config_file,
    get_spec,
    load_dataset_samples,
    register_dataset,
    unregister_dataset,
)
from lade_bench.datasets.sample import TASKS, Sample
from lade_bench.datasets.spec import DatasetSpec, DatasetSpecError, Prompt, Scorer, Unscored

__all__ = [
    "DEFAULT_CONF_DIR",
    "TASKS",
    "CodeAnswer",
    "DatasetFormatError",
    "DatasetSpec",
    "DatasetSpecError",
    "DatasetUnavailableError",
    "Prompt",
    "Sample",
    "Scorer",
    "UnknownDatasetError",
    "Unscored",
    "available_datasets",
    "category_selection",
    "build_messages",
    "completion_text",
    "config_file",
    "extract_gold_number",
    "filter_by_prompt_length",
    "get_spec",
    "load_dataset_samples",
    "register_dataset",
    "render_prompt",
    "unregister_dataset",
]
