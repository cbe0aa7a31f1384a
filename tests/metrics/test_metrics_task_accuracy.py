import json
from decimal import Decimal

import numpy as np
import pytest

from lade_bench.metrics.task_accuracy import extract_final_number, gsm8k_correct, match_rate


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72"),
        ("#### 1,234", "1234"),
        ("It costs $1,234.50 in total.", "1234.5"),
        ("The temperature drops to -5 degrees.", "-5"),
        ("She lost -$1,000 overall", "-1000"),
        ("First 3, then 5, so the answer is 18.", "18"),
        ("1,000,000 people", "1000000"),
        ("pages 10-20", "20"),
        ("10 - 3 = 7", "7"),
        ("#### 18\nQ: next question has 5 apples", "18"),
        ("The answer is 0.5", "0.5"),
        ("#### -3", "-3"),
        ("no number here", None),
        ("version v1.2 of x2", None),
    ],
)
def test_extract_final_number(text, expected):
    result = extract_final_number(text)
    assert result == (None if expected is None else Decimal(expected))


def test_gsm8k_correct():
    gold = "Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day.\n#### 18"
    assert gsm8k_correct("She makes $18.00 per day.", gold)
    assert gsm8k_correct("so the answer is 18", "18")
    assert not gsm8k_correct("She makes $16 per day.", gold)
    assert not gsm8k_correct("I don't know.", gold)
    with pytest.raises(ValueError, match="gold answer has no number"):
        gsm8k_correct("18", "no gold")


def test_real_gsm8k_gold_answers_extract(shared_data_dir):
    path = shared_data_dir / "gsm8k" / "test.jsonl"
    if not path.exists():
        pytest.skip(f"GSM8K data not found at {path}")
    with path.open() as f:
        records = [json.loads(line) for _, line in zip(range(200), f, strict=False)]
    for record in records:
        tail = record["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        assert extract_final_number(record["answer"]) == Decimal(tail)
        assert gsm8k_correct(record["answer"], record["answer"])


def test_match_rate():
    assert match_rate([True, False, True, True]) == pytest.approx(0.75)
    assert match_rate(np.array([1, 0])) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="non-empty"):
        match_rate([])
    with pytest.raises(ValueError, match="booleans"):
        match_rate([0.5, 1.0])
