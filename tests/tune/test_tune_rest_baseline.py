"""REST is a tuner baseline at its defaults: the tune's plan resolves its reference datastore, or refuses
the tune before anything loads with the command that builds it."""

from __future__ import annotations

import pytest

from lade_bench.models.embedded import converted_smollm2_dir
from lade_bench.rest_datastore.build import datastore_folder, write_datastore
from lade_bench.rest_datastore.reader import REFERENCE
from lade_bench.runner.plan import CellConfigError
from lade_bench.tune.tuner import prepare

from .conftest import TINY_TUNE, compose_tune, tmp_outputs


def test_rest_as_a_baseline_runs_on_the_reference_datastore_of_the_tuned_model(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "smollm2-135m-instruct").symlink_to(converted_smollm2_dir())  # the tokenizer, not converted again
    overrides = [*TINY_TUNE, *tmp_outputs(tmp_path), "tune.baselines=[rest]", f"model_cache_dir={cache}"]
    with pytest.raises(CellConfigError, match=f"build --reference --model smollm2 --cache-dir {cache}"):
        prepare(compose_tune(overrides))
    folder = write_datastore(
        datastore_folder(cache, "embedded:smollm2", REFERENCE),
        [[5, 6, 7]],
        tokenizer="embedded:smollm2",
        vocab_size=49_152,
    )
    prepared = prepare(compose_tune(overrides))
    assert prepared.arms == ("ar", "lookahead", "rest")
    assert prepared.base_plan.settings["rest"].datastore == str(folder)
