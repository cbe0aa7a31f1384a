"""Fixtures for the dataset tests: real data locations and a real tokenizer built offline."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets"

# ChatML with a template-level BOS: lets the tests check that the chat path adds no second BOS
# and no EOS after the generation prompt.
CHATML_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<s>", "</s>", "<|im_start|>", "<|im_end|>"]

# Training text for the toy BPE: enough variety for merges; byte-level BPE encodes any text anyway.
CORPUS = [
    "Summarize the following article in one sentence.",
    "Complete the following Python function. Reply with the whole function in a ```python code block.",
    "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n    return False\n",
    "Compose an engaging travel blog post about a recent trip to Hawaii.",
    "Rewrite your previous response. Start every sentence with the letter A.",
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning.",
    "The council voted to turn a disused railway line into a cycle path.",
] * 4


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def shared_data(shared_data_dir: Path) -> Path:
    """The project's `shared/data` folder (see the root conftest's --shared-data option)."""
    return shared_data_dir


def _shared_file(shared_data: Path, relative: str) -> Path:
    path = shared_data / relative
    if not path.is_file():
        pytest.skip(f"{path} is absent: pass --shared-data=DIR, the folder holding {relative}")
    return path


@pytest.fixture(scope="session")
def gsm8k_path(shared_data: Path) -> Path:
    return _shared_file(shared_data, "gsm8k/test.jsonl")


@pytest.fixture(scope="session")
def classeval_path(shared_data: Path) -> Path:
    return _shared_file(shared_data, "classeval/ClassEval_data.json")


def _build_tokenizers():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    raw.train_from_iterator(CORPUS, trainer)
    plain = Tokenizer.from_str(raw.to_str())  # GPT-2 style: encode adds nothing
    # Llama style, exaggerated: encode adds BOS *and* EOS, so an EOS leak into prompts would show.
    raw.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        special_tokens=[("<s>", raw.token_to_id("<s>")), ("</s>", raw.token_to_id("</s>"))],
    )
    made = []
    for backend in (raw, plain):
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>")
        tok.chat_template = CHATML_TEMPLATE
        made.append(tok)
    return made


@pytest.fixture(scope="session")
def tokenizers_pair():
    return _build_tokenizers()


@pytest.fixture(scope="session")
def tokenizer(tokenizers_pair):
    """Byte-level BPE with a ChatML template whose plain encode adds BOS and EOS."""
    return tokenizers_pair[0]


@pytest.fixture(scope="session")
def tokenizer_no_bos(tokenizers_pair):
    """The same vocabulary with no post-processor (plain encode adds no special tokens)."""
    return tokenizers_pair[1]
