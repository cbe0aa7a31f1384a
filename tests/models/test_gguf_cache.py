"""Converting a GGUF into the cache when another process converts the same model at the same time."""

from __future__ import annotations

import shutil

import pytest
from transformers import LlamaForCausalLM

from lade_bench.models.embedded import converted_smollm2_dir, smollm2_gguf_path
from lade_bench.models.gguf_cache import convert_gguf, is_converted

pytestmark = pytest.mark.slow


def test_a_conversion_finished_meanwhile_by_another_process_is_kept_not_replaced(tmp_path):
    target = tmp_path / "smollm2-135m-instruct"
    finished = converted_smollm2_dir()

    def peer_finishes_first(_scratch):
        # Another process (a parallel cell, a second test worker) completes its conversion while
        # ours is still dequantising: its folder may already be loaded from, so it must survive.
        shutil.copytree(finished, target)
        (target / "peer.txt").write_text("the other process's folder")
        return smollm2_gguf_path()

    assert convert_gguf(target, peer_finishes_first, LlamaForCausalLM) == target
    assert (target / "peer.txt").read_text() == "the other process's folder"
    assert is_converted(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name], "our staging folder was left behind"
