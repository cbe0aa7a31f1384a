"""What a cell ran on, recorded in its manifest and checked before every resume.

A cell's id hashes its semantic config, where a local dataset file enters by name only (the same file
copied elsewhere is the same cell, and committed cells keep their ids). So the id alone cannot tell a
3-question subset file from the full file of the same name, nor the same lines in another order. The
manifest therefore records the content of what was read (``inputs``): the dataset file's sha256 (when
``dataset.path`` names one), the loaded sample ids in order, and a digest of the loaded samples'
content. A later run of the same cell compares them with what it has just loaded, before the model
loads, and refuses a mismatch naming what changed: resuming would mix rows of two sample sets in one
cell, or feed a stateful arm its requests in another order than the rows already written.

Manifests written before this record existed are checked by what they do record: the order the stateful
arms' states followed (``method_state.sample_order``) and the sample ids of the stored rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lade_bench.datasets import Sample
from lade_bench.rest_datastore.build import file_sha256
from lade_bench.runner.plan import CellConfigError, CellPlan

INPUTS_FIELD = "inputs"


class CellInputsChangedError(CellConfigError):
    """A resumed cell's dataset or samples differ from those its manifest recorded."""


def samples_sha256(samples: Iterable[Sample]) -> str:
    """A digest of the samples' content in order: ids, turns, reference, task, payload and prefix.

    Two loads give the same digest exactly when they yield the same samples in the same order, whatever
    file or wheel they came from.
    """
    digest = hashlib.sha256()
    for sample in samples:
        record = [
            sample.sample_id,
            list(sample.turns),
            sample.reference,
            sample.task,
            sample.payload,
            sample.completion_prefix,
        ]
        # default=repr: a payload value without a JSON form (rare) still hashes by its printed value.
        digest.update(json.dumps(record, sort_keys=True, ensure_ascii=False, default=repr).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def inputs_record(plan: CellPlan, samples: Sequence[Sample]) -> dict[str, Any]:
    """The manifest's ``inputs``: the dataset file (path as given and sha256; None for a wheel or hub
    dataset), the loaded sample ids in order and the digest of their content."""
    path = plan.dataset.path
    dataset_file = None
    if path:
        dataset_file = {"path": str(path), "sha256": file_sha256(path)}
    return {
        "dataset_file": dataset_file,
        "sample_ids": [sample.sample_id for sample in samples],
        "samples_sha256": samples_sha256(samples),
    }


def check_resume_inputs(
    plan: CellPlan,
    inputs: Mapping[str, Any],
    manifest: Mapping[str, Any] | None,
    stored_sample_ids: Iterable[str],
) -> None:
    """Refuse to resume the cell when what was just loaded is not what its earlier run ran on.

    Args:
        plan: the cell's plan.
        inputs: this run's :func:`inputs_record` (of the samples loaded, before the prompt-length fit).
        manifest: the cell's existing manifest (None: none readable, e.g. a cell killed before writing
            it, or one set aside as damaged).
        stored_sample_ids: the sample id of every row already in the cell.

    Raises:
        CellInputsChangedError: the dataset file's content, the loaded sample ids or their order, or the
            samples' content differ from the record, or a stored row belongs to a sample not loaded now.
            The message names what changed and how to run the new samples as a cell of their own.
    """
    record = (manifest or {}).get(INPUTS_FIELD)
    if isinstance(record, Mapping):
        problem = _record_mismatch(inputs, record)
    else:
        problem = _legacy_mismatch(inputs["sample_ids"], manifest or {})
    if problem is None:
        loaded = set(inputs["sample_ids"])
        foreign = sorted({str(i) for i in stored_sample_ids} - loaded)
        if foreign:
            problem = (
                f"{len(foreign)} sample(s) with stored rows are not among the {len(loaded)} loaded now "
                f"(e.g. {foreign[:3]})"
            )
    if problem is not None:
        raise CellInputsChangedError(_refusal(plan, problem))


def _record_mismatch(now: Mapping[str, Any], recorded: Mapping[str, Any]) -> str | None:
    """What differs between this run's inputs and the recorded ones (None: nothing)."""
    # The most telling difference first: which samples, then their content, then the file's other bytes.
    problem = _order_mismatch("loaded sample ids", list(recorded.get("sample_ids") or []), now["sample_ids"])
    if problem is not None:
        return problem
    if recorded.get("samples_sha256") != now["samples_sha256"]:
        return "the samples' content (turns, references) differs from what the cell ran on, under the same ids"
    old_file, new_file = recorded.get("dataset_file"), now["dataset_file"]
    if old_file and new_file and old_file.get("sha256") != new_file["sha256"]:
        return (
            f"dataset file {new_file['path']!r} has sha256 {new_file['sha256'][:12]}, the cell ran on "
            f"{str(old_file.get('path'))!r} with sha256 {str(old_file.get('sha256'))[:12]}"
        )
    return None


def _legacy_mismatch(sample_ids: Sequence[str], manifest: Mapping[str, Any]) -> str | None:
    """For a manifest without ``inputs``: the stateful arms' recorded order against the loaded order."""
    state = manifest.get("method_state")
    order = state.get("sample_order") if isinstance(state, Mapping) else None
    if not isinstance(order, list):
        return None
    skipped = set(((manifest.get("samples") or {}).get("skipped_ids")) or [])
    loaded = [i for i in sample_ids if i not in skipped]
    return _order_mismatch("sample order of the stateful arms", order, loaded)


def _order_mismatch(what: str, recorded: list[Any], now: list[str]) -> str | None:
    recorded = [str(i) for i in recorded]
    if recorded == now:
        return None
    if sorted(recorded) == sorted(now):
        at = next(i for i, (a, b) in enumerate(zip(recorded, now, strict=True)) if a != b)
        first = f"position {at}: {recorded[at]!r} then, {now[at]!r} now"
        return f"the {what} are the same samples in another order ({first})"
    added, missing = sorted(set(now) - set(recorded)), sorted(set(recorded) - set(now))
    parts = [f"{len(recorded)} recorded, {len(now)} now"]
    if added:
        parts.append(f"new: {added[:3]}{' ...' if len(added) > 3 else ''}")
    if missing:
        parts.append(f"gone: {missing[:3]}{' ...' if len(missing) > 3 else ''}")
    return f"the {what} differ ({'; '.join(parts)})"


def _refusal(plan: CellPlan, problem: str) -> str:
    folder = plan.cell_dir
    return (
        f"cell {plan.cell_id} cannot resume: {problem}. Its rows were generated on other samples, and "
        f"mixing them would make the cell describe neither. Nothing was changed. To run these samples as a "
        f"new cell, move the old one aside (mv '{folder}' '{folder}.old') and rerun the same command, or "
        f"give the run another sweep folder (sweep_name=...); to finish the old cell, rerun it on the "
        f"dataset it recorded."
    )
