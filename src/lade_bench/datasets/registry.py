"""Name -> task spec registry and the one entry point the runner calls, ``load_dataset_samples``."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from lade_bench.conf import PACKAGE_CONF_DIR
from lade_bench.datasets._sources import DatasetFormatError
from lade_bench.datasets.sample import Sample
from lade_bench.datasets.spec import DatasetSpec, DatasetSpecError


class UnknownDatasetError(ValueError):
    """A dataset name that is not in the registry."""


# The package's configs, where lade_bench.run composes from.
DEFAULT_CONF_DIR = PACKAGE_CONF_DIR

# The registry itself: filled below from the built-in modules, extended by register_dataset.
_REGISTRY: dict[str, DatasetSpec] = {}


def config_file(spec: DatasetSpec, conf_dir: Path = DEFAULT_CONF_DIR) -> Path:
    """The Hydra config of ``spec`` under ``conf_dir``: ``<conf_dir>/dataset/<spec.config>.yaml``."""
    return conf_dir / "dataset" / f"{spec.config}.yaml"


def register_dataset(spec: DatasetSpec, *, conf_dir: Path | None = DEFAULT_CONF_DIR) -> DatasetSpec:
    """Add ``spec`` to the registry, after checking that ``dataset=<spec.config>`` can be composed.

    Args:
        spec: a complete spec (``DatasetSpec`` checks its own fields: scorer or ``Unscored``, ...).
        conf_dir: the Hydra config folder holding ``dataset/<spec.config>.yaml``; a dataset defined
            outside the package passes the folder it adds to ``hydra.searchpath``. None: no check
            (the built-ins, whose config files a test checks: the package must import where no
            ``conf/`` lies beside it, e.g. a copy of ``src/`` made by the mutation check).

    Returns:
        ``spec``, so a module can register and keep it in one line.

    Raises:
        TypeError: ``spec`` is not a ``DatasetSpec``.
        DatasetSpecError: the name is taken, or the config file is missing (both named).
    """
    if not isinstance(spec, DatasetSpec):
        raise TypeError(f"register_dataset takes a DatasetSpec, got {type(spec).__name__}")
    if spec.name in _REGISTRY:
        raise DatasetSpecError(f"dataset {spec.name!r} is already registered; pick another name")
    config = None if conf_dir is None else config_file(spec, conf_dir)
    if config is not None and not config.is_file():
        raise DatasetSpecError(
            f"dataset {spec.name!r}: its config file {config} is missing; write it (see docs/adding_a_dataset.md)"
        )
    _REGISTRY[spec.name] = spec
    return spec


def unregister_dataset(name: str) -> DatasetSpec:
    """Remove and return the spec registered under ``name`` (a test's own dataset, once it is done).

    Raises:
        UnknownDatasetError: ``name`` is not registered.
    """
    spec = get_spec(name)
    del _REGISTRY[name]
    return spec


def available_datasets() -> list[str]:
    """Return the registered dataset names, sorted."""
    return sorted(_REGISTRY)


def ending_datasets() -> list[str]:
    """The registered datasets whose scorer reads whether an output ended (``DatasetSpec.reads_ending``)."""
    return [name for name in sorted(_REGISTRY) if _REGISTRY[name].reads_ending]


def get_spec(name: str) -> DatasetSpec:
    """Return the spec registered under ``name``.

    Raises:
        UnknownDatasetError: listing the valid names and, when one is close, a "did you mean".
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        pass
    close = difflib.get_close_matches(str(name), available_datasets(), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownDatasetError(f"unknown dataset {name!r}.{hint} Valid names: {', '.join(available_datasets())}.")


def discover_specs(package: str) -> list[DatasetSpec]:
    """The ``SPEC`` (a ``DatasetSpec``) of every module of ``package`` that declares one, by module name.

    How the built-in datasets are found: a new one is its module beside the others (plus its config
    file), with no list to extend. The modules are imported here, in name order, so no import order
    elsewhere can leave one out.
    """
    found = []
    for info in sorted(pkgutil.iter_modules(importlib.import_module(package).__path__), key=lambda m: m.name):
        spec = getattr(importlib.import_module(f"{package}.{info.name}"), "SPEC", None)
        if isinstance(spec, DatasetSpec):
            found.append(spec)
    return found


def _register_builtins() -> None:
    for spec in discover_specs("lade_bench.datasets"):
        register_dataset(spec, conf_dir=None)


_register_builtins()


def load_dataset_samples(
    name: str,
    *,
    path: str | None = None,
    limit: int | None = None,
    split: str | None = None,
    seed: int | None = None,
    offset: int = 0,
    categories: Sequence[str] | None = None,
    per_category_limit: int | None = None,
) -> list[Sample]:
    """Load a registered dataset as a deterministic list of samples.

    Args:
        name: registry key, e.g. "mt_bench", "gsm8k" (see ``available_datasets``).
        path: a local file in the dataset's upstream schema (JSONL, JSON list, .gz, or parquet).
            When given, only that file is read: the hub client is not even imported.
        limit: keep the first ``limit`` samples (after the optional shuffle); None keeps all.
        split: the split to read from the default source; None means the dataset's benchmark split
            ("test"). A local file is one split already, so with ``path`` only the default is
            accepted.
        seed: None keeps the file's own order; an int shuffles with ``random.Random(seed)`` first, so
            ``limit`` then draws the same subset on every run and machine.
        offset: drop the first ``offset`` samples (after the shuffle, before ``limit``), e.g. those a
            tuner chose its configuration on, so an evaluation reports on samples it never saw.
        categories: for a dataset with categories (``DatasetSpec.categories``), the groups or
            categories to keep (applied first); None keeps all.
        per_category_limit: for such a dataset, keep at most this many samples per group (after the
            shuffle and offset, before ``limit``), taken in turn from the group's categories so that
            a capped group still spans them; None: no cap.

    Returns:
        Samples with ids unique within the dataset.

    Raises:
        UnknownDatasetError: ``name`` is not registered.
        FileNotFoundError: ``path`` does not exist or is not a file.
        DatasetUnavailableError: the default source (wheel or hub) cannot be read here; the message
            says to set ``dataset.path``.
        DatasetFormatError: the file is empty, does not parse, or has bad records (each named by
            file and line with what is wrong: missing fields, a null, blank or duplicate id, blank
            prompt text, ``turns`` not a non-empty list of non-blank strings).
        ValueError: bad ``limit``, ``offset``, ``split``, ``categories`` (naming the allowed ones) or
            ``per_category_limit``, or an ``offset`` that leaves no sample.
    """
    spec = get_spec(name)
    wanted = category_selection(spec, categories, per_category_limit)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if split is None:
        split = spec.default_split
    elif spec.splits is not None and split not in spec.splits:
        raise ValueError(f"dataset {name!r} has split(s) {list(spec.splits)}, not {split!r}")

    file = None
    if path is not None:
        file = Path(path).expanduser()
        if not file.is_file():
            what = "is a directory, not a file" if file.is_dir() else "does not exist"
            raise FileNotFoundError(f"dataset {name!r}: dataset.path {str(path)!r} {what} (resolved: {file.resolve()})")
        if split != spec.default_split:
            raise ValueError(
                f"dataset {name!r}: a local file is a single split; drop split={split!r} when dataset.path is set"
            )

    # Every record is checked here (records.build_samples), so a bad one costs no model load.
    samples = spec.load(file, split)
    if wanted is not None:
        samples = [s for s in samples if s.payload["category"] in wanted]
    counts = Counter(s.sample_id for s in samples)
    if len(counts) != len(samples):
        # Result rows are keyed by sample id; duplicates would silently merge rows on resume.
        dupes = sorted(i for i, n in counts.items() if n > 1)[:5]
        raise DatasetFormatError(f"dataset {name!r}: duplicate sample ids {dupes} in {file or spec.source}")
    if seed is not None:
        samples = samples.copy()
        random.Random(seed).shuffle(samples)
    if offset and offset >= len(samples):
        allowed = f"0..{len(samples) - 1}"
        raise ValueError(f"dataset {name!r}: offset={offset} leaves no sample of its {len(samples)}; use {allowed}")
    samples = samples[offset:]
    if per_category_limit is not None and spec.categories is not None:
        samples = _cap_groups(samples, spec.categories, per_category_limit)
    return samples if limit is None else samples[:limit]


def sample_groups(dataset: str, sample_ids: Iterable[object]) -> str:
    """The groups of a categorised dataset that ``sample_ids`` belong to, joined by ``+`` in the spec's
    order (``"math_reasoning"``, ``"qa+rag"``); "" for a dataset without categories or not registered.

    A Spec-Bench cell runs one group, so its rows' dataset column alone ("spec_bench") would label one
    group as the whole benchmark; reports show a cell's groups beside its dataset with this.
    """
    spec = _REGISTRY.get(str(dataset))
    if spec is None or spec.categories is None or spec.category_of_id is None:
        return ""
    category_of = spec.category_of_id
    categories = {category_of(str(value)) for value in sample_ids}
    return "+".join(group for group, members in spec.categories.items() if categories & set(members))


def category_selection(
    spec: DatasetSpec, categories: Sequence[str] | None, per_category_limit: int | None
) -> set[str] | None:
    """The categories ``dataset.categories`` keeps (None: all), checked before anything is read.

    Raises:
        ValueError: an unknown or empty selection (naming the allowed groups and categories), a
            selection on a dataset without categories, or a ``per_category_limit`` below 1.
    """
    if spec.categories is None:
        if categories is not None or per_category_limit is not None:
            raise ValueError(
                f"dataset {spec.name!r} has no categories: drop dataset.categories and dataset.per_category_limit"
            )
        return None
    if per_category_limit is not None and per_category_limit < 1:
        raise ValueError(f"dataset {spec.name!r}: per_category_limit must be >= 1 or null, got {per_category_limit}")
    if categories is None:
        return None
    groups = spec.categories
    members = [c for group in groups.values() for c in group]
    allowed = list(dict.fromkeys([*groups, *members]))
    unknown = [c for c in categories if c not in allowed]
    if unknown or not list(categories):
        what = f"unknown categor{'y' if len(unknown) == 1 else 'ies'} {unknown}" if unknown else "no category chosen"
        raise ValueError(f"dataset {spec.name!r}: {what}; allowed: {', '.join(allowed)}")
    return {c for name in categories for c in groups.get(name, (name,))}


def _cap_groups(samples: list[Sample], groups: Mapping[str, tuple[str, ...]], cap: int) -> list[Sample]:
    """At most ``cap`` samples per group, taken in turn from its categories, in the samples' order."""
    group_of = {c: group for group, members in groups.items() for c in members}
    queues: dict[str, dict[str, list[Sample]]] = {}
    for sample in samples:
        category = sample.payload["category"]
        queues.setdefault(group_of[category], {}).setdefault(category, []).append(sample)
    kept: set[int] = set()
    for by_category in queues.values():
        taken = 0
        lists = list(by_category.values())
        for rank in range(max(len(items) for items in lists)):
            for items in lists:
                if taken < cap and rank < len(items):
                    kept.add(id(items[rank]))
                    taken += 1
    return [s for s in samples if id(s) in kept]
