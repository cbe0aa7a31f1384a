"""The shipped transformers custom generation folder (``lade_bench.custom_generate_path()``), loaded the
way a user loads it: ``model.generate(custom_generate=<path>, trust_remote_code=True, ...)``."""

from __future__ import annotations

import ast
import re
from fnmatch import fnmatch
from pathlib import Path

import pytest
import torch
from transformers.generation.stopping_criteria import MaxTimeCriteria, StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer
from transformers.generation.utils import GenerateDecoderOnlyOutput

import lade_bench
from lade_bench.decoding.core.params import DecodingConfigError
from lade_bench.models.tiny import tiny_model

from .helpers import repetitive_prompt

ARCHITECTURES = ("llama", "gpt2", "qwen3")
NEW_TOKENS = 40


@pytest.fixture(autouse=True)
def private_modules_cache(tmp_path, monkeypatch):
    """transformers copies generate.py into its modules cache before importing it: keep that copy in
    tmp_path instead of the developer's ~/.cache/huggingface."""
    monkeypatch.setattr("transformers.dynamic_module_utils.HF_MODULES_CACHE", str(tmp_path / "modules"))


@pytest.fixture(scope="module")
def models() -> dict[str, torch.nn.Module]:
    return {arch: tiny_model(arch, init_scale=3.0, seed=7) for arch in ARCHITECTURES}


def _prompt(length: int = 30) -> torch.Tensor:
    return torch.tensor([repetitive_prompt(length, seed=4)])


def _lookahead(model, prompt, **kwargs):
    return model.generate(prompt, custom_generate=lade_bench.custom_generate_path(), trust_remote_code=True, **kwargs)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_greedy_equals_plain_generate(models, arch):
    model, prompt = models[arch], _prompt()
    reference = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False)
    other = {"lookahead_n": 4, "lookahead_w": 5, "lookahead_g": 3, "lookahead_verification": "trie"}
    for lookahead_kwargs in ({}, other):
        out = _lookahead(model, prompt, max_new_tokens=NEW_TOKENS, do_sample=False, **lookahead_kwargs)
        assert out.tolist() == reference.tolist(), lookahead_kwargs


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_stops_at_eos_like_plain_generate(models, arch):
    model, prompt = models[arch], _prompt()
    free_run = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=[])[0, prompt.shape[1] :]
    # The last token to make its first appearance (tiny models fall into loops): the stop lands as
    # deep into the generation as possible, after lookahead has accepted guesses.
    tokens = free_run.tolist()
    eos = [t for i, t in enumerate(tokens[:-1]) if i > 0 and t not in tokens[:i]][-1]
    reference = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=eos)
    out = _lookahead(model, prompt, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=eos)
    assert out.tolist() == reference.tolist()
    assert out[0, -1] == eos and out.shape[1] < prompt.shape[1] + NEW_TOKENS


def test_input_ids_keyword_mask_max_length_and_return_dict(models):
    model, prompt = models["llama"], _prompt()
    reference = model.generate(prompt, max_length=prompt.shape[1] + 12, do_sample=False)
    out = _lookahead(
        model,
        None,
        input_ids=prompt,
        attention_mask=torch.ones_like(prompt),
        max_length=prompt.shape[1] + 12,
        do_sample=False,
        return_dict_in_generate=True,
    )
    assert isinstance(out, GenerateDecoderOnlyOutput)
    assert out.sequences.tolist() == reference.tolist()


def test_sampling_is_seeded(models):
    model, prompt = models["llama"], _prompt()
    runs = [_lookahead(model, prompt, max_new_tokens=16, do_sample=True, top_k=20, lookahead_seed=3) for _ in range(2)]
    assert runs[0].tolist() == runs[1].tolist()
    assert runs[0].shape == (1, prompt.shape[1] + 16)


def test_batch_larger_than_one_is_refused(models):
    with pytest.raises(DecodingConfigError, match=r"batch size 2 is not supported.*allowed batch size: 1"):
        _lookahead(models["llama"], _prompt().repeat(2, 1), max_new_tokens=8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lookahead_n": 1}, r"lookahead_n=1 is not allowed.*use an integer >= 2"),
        ({"lookahead_w": 4, "lookahead_g": -1}, r"^lookahead_g=-1 is not allowed.*use an integer >= 0"),
        ({"lookahead_verification": "tree"}, r"lookahead_verification='tree' is not allowed.*use one of flat, trie"),
        ({"lookahead_seed": -1}, r"lookahead_seed=-1 is not allowed: use an integer >= 0"),
        ({"lookahead_window": 3}, r"unknown lookahead argument\(s\) \['lookahead_window'\].*'lookahead_w'"),
        ({"num_beams": 2}, r"num_beams=2 is not supported.*use num_beams=1"),
        ({"attention_mask": torch.tensor([[0] + [1] * 29])}, r"attention_mask with padding"),
        ({"stopping_criteria": StoppingCriteriaList([MaxTimeCriteria(5.0)])}, r"stopping_criteria is not supported"),
        ({"streamer": BaseStreamer()}, r"streamer is not supported"),
    ],
)
def test_bad_arguments_are_refused_by_name(models, kwargs, message):
    with pytest.raises(DecodingConfigError, match=message):
        _lookahead(models["llama"], _prompt(), max_new_tokens=8, **kwargs)


def test_loading_needs_trust_remote_code(models):
    with pytest.raises(ValueError, match="trust_remote_code"):
        models["llama"].generate(
            _prompt(), custom_generate=lade_bench.custom_generate_path(), trust_remote_code=False, max_new_tokens=4
        )


def test_folder_is_shipped_as_package_data():
    """Every file of the folder is matched by pyproject's package-data, so an installed lade-bench has it."""
    folder = Path(lade_bench.custom_generate_path())
    assert (folder / "custom_generate" / "generate.py").is_file()
    assert "lade-bench" in (folder / "custom_generate" / "requirements.txt").read_text()
    assert "custom_generate" in (folder / "README.md").read_text().split("---")[1]  # the Hub tag
    # Read with a regex, not tomllib: the project still supports Python 3.10.
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    globs = ast.literal_eval(
        re.search(r"\[tool\.setuptools\.package-data\].*?^lade_bench = (\[.*?\])", pyproject, re.S | re.M)[1]
    )
    package = Path(lade_bench.__file__).resolve().parent
    files = [
        p.relative_to(package).as_posix() for p in folder.rglob("*") if p.is_file() and "__pycache__" not in str(p)
    ]
    assert files and all(any(fnmatch(f, g) for g in globs) for f in files), files
