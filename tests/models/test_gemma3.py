"""The embedded Gemma-3-270M: offline conversion, its hybrid attention, and exact lookahead on it."""

from __future__ import annotations

import pytest

from lade_bench.datasets import load_dataset_samples, render_prompt
from lade_bench.decoding import LookaheadParams, autoregressive_generate, jacobi_generate, lookahead_generate
from lade_bench.decoding.core.checks import layer_attention_of
from lade_bench.models.gemma3 import GEMMA3_FOLDER, converted_gemma3_dir

pytestmark = pytest.mark.slow


def test_converted_model_has_the_documented_shape(gemma3):
    model, tokenizer = gemma3
    config = model.config
    assert type(model).__name__ == "Gemma3ForCausalLM" and config.model_type == "gemma3_text"
    assert config.num_hidden_layers == 18 and config.hidden_size == 640
    assert config.vocab_size == 262144 and len(tokenizer) == 262144
    assert 265e6 < sum(p.numel() for p in model.parameters()) < 270e6
    # A base model: no chat template; plain text gets a leading <bos>.
    assert tokenizer.chat_template is None
    assert tokenizer.encode("Hello", add_special_tokens=True)[0] == tokenizer.bos_token_id
    # Hybrid attention: 5 local layers (512-token window) per global one; one mask per layer type.
    assert config.layer_types.count("full_attention") == 3 and config.sliding_window == 512
    attention = layer_attention_of(model)
    assert attention.sliding_window == 512 and attention.mask_keys == ("full_attention", "sliding_attention")


def test_cache_folder_is_reused_and_carries_the_terms():
    folder = converted_gemma3_dir()
    assert folder.name == GEMMA3_FOLDER
    assert (folder / "GEMMA_TERMS.html").is_file() and (folder / "model.safetensors").is_file()
    assert not list(folder.rglob("*.gguf"))  # the assembled GGUF is deleted after the conversion


def test_greedy_completion_is_coherent_code(gemma3):
    model, tokenizer = gemma3
    ids = tokenizer.encode("def fibonacci(n):", add_special_tokens=True)
    text = tokenizer.decode(autoregressive_generate(model, ids, 16, eos_token_id=tokenizer.eos_token_id).tokens)
    assert "return" in text and "n" in text


@pytest.fixture(scope="module")
def real_prompts(gemma3):
    """An MT-Bench question as a raw completion prompt (as conf/model/gemma3_270m.yaml renders it) and code."""
    _, tokenizer = gemma3
    samples = load_dataset_samples("mt_bench", limit=1)
    prompts = [render_prompt(tokenizer, sample, 0, [], chat=False) for sample in samples]
    return [*prompts, tokenizer.encode("def fibonacci(n):", add_special_tokens=True)]


def test_lookahead_equals_ar_greedy_on_real_prompts(gemma3, real_prompts):
    # Kept short: every logit row costs a 262,144-wide LM head, which dominates a CPU step.
    model, tokenizer = gemma3
    eos = tokenizer.eos_token_id
    references = [autoregressive_generate(model, prompt, 6, eos_token_id=eos) for prompt in real_prompts]
    for prompt, reference in zip(real_prompts, references, strict=True):
        result = lookahead_generate(model, prompt, LookaheadParams(4, 3, 3), 6, eos_token_id=eos)
        assert result.tokens == reference.tokens, tokenizer.decode(reference.tokens)
    assert lookahead_generate(model, real_prompts[0], LookaheadParams(5, 7, 7), 6, eos_token_id=eos).tokens == (
        references[0].tokens
    )


def test_jacobi_equals_ar_greedy(gemma3, real_prompts):
    model, tokenizer = gemma3
    reference = autoregressive_generate(model, real_prompts[-1], 8, eos_token_id=tokenizer.eos_token_id)
    result = jacobi_generate(model, real_prompts[-1], 8, block_size=3, eos_token_id=tokenizer.eos_token_id)
    assert result.tokens == reference.tokens


def test_the_tokenizer_read_from_its_file_is_the_classes_own(gemma3):
    """The embedded Gemma's tokenizer is read from tokenizer.json by the tokenizers library
    (``gguf_cache.READ_FROM_FILE``): every MT-Bench and HumanEval prompt, and text that needs byte fallback,
    encodes to the ids GemmaTokenizer's own Python rebuild gives and decodes back alike; the special tokens,
    padding side and input names are the class's."""
    from transformers import AutoTokenizer, GemmaTokenizer

    _, fast = gemma3
    assert type(fast).__name__ == "TokenizersBackend"
    slow = AutoTokenizer.from_pretrained(converted_gemma3_dir())
    assert isinstance(slow, GemmaTokenizer)
    texts = [
        turn
        for name in ("mt_bench", "humaneval")
        for sample in load_dataset_samples(name, limit=None)
        for turn in sample.turns
    ]
    texts += ["  leading spaces,\ttabs\nand lines ", "Ünïcödé — 漢字 🙂 \x00\x7f", "<bos> literal <eos> markers", ""]
    for text in texts:
        for special in (True, False):
            ids = slow.encode(text, add_special_tokens=special)
            assert fast.encode(text, add_special_tokens=special) == ids, text[:60]
        assert fast.decode(ids) == slow.decode(ids) and fast.decode(ids, skip_special_tokens=True) == slow.decode(
            ids, skip_special_tokens=True
        )
    for attribute in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "padding_side", "chat_template"):
        assert getattr(fast, attribute) == getattr(slow, attribute), attribute
    assert fast.all_special_ids == slow.all_special_ids and fast.model_input_names == slow.model_input_names
    assert len(fast) == len(slow) and fast.get_vocab() == slow.get_vocab()
