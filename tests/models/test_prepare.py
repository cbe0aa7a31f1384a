"""``python -m lade_bench.models.prepare``: the setup step that converts the embedded models ahead of use."""

from __future__ import annotations

import pytest

from lade_bench.models.embedded import converted_smollm2_dir
from lade_bench.models.gguf_cache import is_converted
from lade_bench.models.prepare import main, prepare


def test_a_converted_model_is_reused_and_its_folder_printed(smollm2, capsys):
    # The session fixture has converted SmolLM2 into the default cache (or setup.sh did): reused, not redone.
    folder = converted_smollm2_dir()
    before = (folder / "config.json").stat().st_mtime_ns
    assert main(["--models", "smollm2"]) == 0
    assert capsys.readouterr().out == f"smollm2: converted in {folder}\n"
    assert is_converted(folder) and (folder / "config.json").stat().st_mtime_ns == before


def test_a_model_that_is_not_embedded_is_named_with_the_allowed_ones(tmp_path):
    with pytest.raises(ValueError, match=r"not an embedded model: 'llama2'; allowed: smollm2, gemma3_270m"):
        prepare(["smollm2", "llama2"], tmp_path)
    assert list(tmp_path.iterdir()) == []  # refused before converting anything
    with pytest.raises(SystemExit):
        main(["--models", "llama2"])
