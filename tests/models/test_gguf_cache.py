"""Converting a GGUF into the cache when another process converts the same model at the same time."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
from transformers import AutoTokenizer, LlamaForCausalLM

from lade_bench.models.embedded import converted_smollm2_dir
from lade_bench.models.gguf_cache import convert_gguf, is_converted

VOCAB = 512  # SmolLM2's special tokens, its 256 byte tokens and its first merges


def _tiny_gguf(path: Path) -> dict[str, np.ndarray]:
    """Write a one-layer llama GGUF in float32 with the first ``VOCAB`` tokens of SmolLM2's tokenizer
    to ``path``; return its tensors by GGUF name.

    Converting SmolLM2's own GGUF costs about 20 CPU-seconds, most of it rebuilding its 49,152-token
    tokenizer; this one converts through the same transformers GGUF path in a fraction of a second.
    """
    tokenizer = json.loads((converted_smollm2_dir() / "tokenizer.json").read_text())
    by_id = {i: token for token, i in tokenizer["model"]["vocab"].items()}
    tokens = [by_id[i] for i in range(VOCAB)]
    kept = set(tokens)
    merges = [f"{a} {b}" for a, b in tokenizer["model"]["merges"] if {a, b, a + b} <= kept]
    special = {t["id"] for t in tokenizer["added_tokens"]}
    hidden, ffn, heads, kv_heads = 16, 32, 2, 1
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.add_block_count(1)
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(VOCAB)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    types = [gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL for i in range(VOCAB)]
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    kv = kv_heads * hidden // heads
    shapes = {
        "token_embd.weight": (VOCAB, hidden), "output_norm.weight": (hidden,),
        "blk.0.attn_norm.weight": (hidden,), "blk.0.ffn_norm.weight": (hidden,),
        "blk.0.attn_q.weight": (hidden, hidden), "blk.0.attn_k.weight": (kv, hidden),
        "blk.0.attn_v.weight": (kv, hidden), "blk.0.attn_output.weight": (hidden, hidden),
        "blk.0.ffn_gate.weight": (ffn, hidden), "blk.0.ffn_up.weight": (ffn, hidden),
        "blk.0.ffn_down.weight": (hidden, ffn),
    }  # fmt: skip
    rng = np.random.default_rng(0)
    tensors = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    for name, tensor in tensors.items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensors


def test_a_conversion_writes_the_gguf_as_a_plain_folder_with_its_tokenizer_and_extras(tmp_path):
    gguf_file = tmp_path / "tiny.gguf"
    tensors = _tiny_gguf(gguf_file)
    licence = tmp_path / "LICENSE"
    licence.write_text("the licence")
    target = tmp_path / "cache" / "tiny"
    assert convert_gguf(target, lambda _scratch: gguf_file, LlamaForCausalLM, [licence]) == target
    assert is_converted(target) and (target / "LICENSE").read_text() == "the licence"
    assert sorted(p.name for p in target.parent.iterdir()) == ["tiny"], "the staging folder was left behind"
    model = LlamaForCausalLM.from_pretrained(target)  # a plain checkpoint: no GGUF, no quantization config
    assert (model.config.num_hidden_layers, model.config.vocab_size) == (1, VOCAB)
    assert not hasattr(model.config, "quantization_config")
    assert np.array_equal(model.model.embed_tokens.weight.detach().numpy(), tensors["token_embd.weight"])
    smollm2 = AutoTokenizer.from_pretrained(converted_smollm2_dir())
    ids = list(range(VOCAB))
    assert AutoTokenizer.from_pretrained(target).convert_ids_to_tokens(ids) == smollm2.convert_ids_to_tokens(ids)


def test_a_conversion_finished_meanwhile_by_another_process_is_kept_not_replaced(tmp_path):
    gguf_file = tmp_path / "tiny.gguf"
    _tiny_gguf(gguf_file)
    cache = tmp_path / "cache"
    target = cache / "smollm2-135m-instruct"
    finished = converted_smollm2_dir()

    def peer_finishes_first(_scratch):
        # Another process (a parallel cell, a second test worker) completes its conversion while
        # ours is still dequantising: its folder may already be loaded from, so it must survive.
        target.mkdir()
        for name in ("config.json", "tokenizer.json"):
            (target / name).write_bytes((finished / name).read_bytes())
        (target / "peer.txt").write_text("the other process's folder")
        return gguf_file

    assert convert_gguf(target, peer_finishes_first, LlamaForCausalLM) == target
    assert (target / "peer.txt").read_text() == "the other process's folder"
    assert is_converted(target)
    assert sorted(p.name for p in cache.iterdir()) == [target.name], "our staging folder was left behind"
