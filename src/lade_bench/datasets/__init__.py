"""Dataset loaders behind a small registry, plus prompt rendering (chat template or raw completion).

Typical use::

    samples = load_dataset_samples("mt_bench", limit=10)
    ids = render_prompt(tokenizer, samples[0], 0, [], chat=True)
"""

from lade_bench.datasets._sources import DatasetFormatError, DatasetUnavailableError
from lade_bench.datasets.gsm8k import extract_gold_number
from lade_bench.datasets.prompts import (
    build_messages,
    completion_text,
    filter_by_prompt_length,
    render_prompt,
)
from lade_bench.datasets.registry import (
    DatasetSpec,
    UnknownDatasetError,
    available_datasets,
    get_spec,
    load_dataset_samples,
)
from lade_bench.datasets.sample import TASKS, Sample

__all__ = [
    "TASKS",
    "DatasetFormatError",
    "DatasetSpec",
    "DatasetUnavailableError",
    "Sample",
    "UnknownDatasetError",
    "available_datasets",
    "build_messages",
    "completion_text",
    "extract_gold_number",
    "filter_by_prompt_length",
    "get_spec",
    "load_dataset_samples",
    "render_prompt",
]
