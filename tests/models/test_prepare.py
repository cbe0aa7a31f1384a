"""``python -m lade_bench.models.prepare``: the setup step that converts the embedded models ahead of use."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch

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
    allowed = "smollm2, gemma3_270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"
    with pytest.raises(ValueError, match=rf"not an embedded model: 'llama2'; allowed: {re.escape(allowed)}$"):
        prepare(["smollm2", "llama2"], tmp_path)
    assert list(tmp_path.iterdir()) == []  # refused before converting anything
    with pytest.raises(SystemExit):
        main(["--models", "llama2"])


def test_setup_prepares_the_default_models_only_and_qwen_is_refused_until_fetched(smollm2, tmp_path, capsys):
    # Without --models: SmolLM2 and Gemma-3-270M (converted by setup, reused), never the large Qwen downloads.
    assert main([]) == 0
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == ["smollm2", "gemma3_270m"]
    # A Qwen model asked for from a run (not the prepare command) is refused in one line, nothing written.
    from lade_bench.models.loading import load_model
    from lade_bench.models.part_wheels import PartError

    config = SimpleNamespace(source="embedded", embedded="qwen2.5-coder-0.5b", chat_template=None)
    with pytest.raises(PartError, match=r"^model.embedded='qwen2.5-coder-0.5b' is not prepared in .*--cache-dir"):
        load_model(config, torch.device("cpu"), torch.float32, "sdpa", cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
