"""Hub-only datasets, read from local copies: shared real files (GSM8K, ClassEval) and fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from lade_bench.datasets import extract_gold_number, load_dataset_samples


def test_gsm8k_from_the_shared_copy(gsm8k_path):
    samples = load_dataset_samples("gsm8k", path=str(gsm8k_path))
    assert len(samples) == 1319
    first, second = samples[0], samples[1]
    assert (first.sample_id, first.task) == ("0", "math")
    assert first.turns[0].endswith("Question: " + first.payload["question"])
    assert first.payload["question"].startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert first.reference == first.payload["gold"] == "18"
    assert second.reference == "3"  # the robe: 2 bolts blue + 1 white
    # Thousands separators are dropped from the gold number.
    with_commas = [s for s in samples if "," in s.payload["answer"].rpartition("####")[2]]
    assert len(with_commas) == 14
    assert all("," not in s.reference and s.reference.isdigit() for s in with_commas)


def test_extract_gold_number():
    assert extract_gold_number("so 2 + 3 = <<2+3=5>>5\n#### 5") == "5"
    assert extract_gold_number("#### 1,450,000") == "1450000"
    assert extract_gold_number("loss of 4\n#### -4") == "-4"
    with pytest.raises(ValueError, match="####"):
        extract_gold_number("The answer is 5.")


def test_classeval_from_the_shared_copy(classeval_path):
    samples = load_dataset_samples("classeval", path=str(classeval_path))
    assert len(samples) == 100
    first = samples[0]
    assert (first.sample_id, first.task) == ("ClassEval_0", "code")
    assert first.payload["class_name"] == "AccessGatewayFilter"
    assert first.payload["import_statement"] == ["import logging", "import datetime"]
    assert "AccessGatewayFilterTestFilter" in first.payload["test_classes"]
    assert first.payload["test"].startswith("import unittest")
    assert first.completion_prefix == first.payload["skeleton"]
    assert "class AccessGatewayFilter:" in first.turns[0]
    assert first.turns[0].startswith("Please complete the class AccessGatewayFilter in the following code.")
    assert "def filter(self, request):" in first.reference


def test_mbpp_from_the_fixture(fixtures_dir):
    samples = load_dataset_samples("mbpp", path=str(fixtures_dir / "mbpp_sample.jsonl"))
    assert [s.sample_id for s in samples] == ["901", "902", "903", "904", "905"]
    first = samples[0]
    assert first.task == "code"
    assert first.payload["test_list"][0] == 'assert count_vowels("hello") == 2'
    assert 'assert count_vowels("hello") == 2' in first.turns[0]  # the asserts fix the function name
    assert first.completion_prefix == (
        '"""\nWrite a function to count the vowels in a given string.\nassert count_vowels("hello") == 2\n"""\n'
    )
    assert samples[3].payload["test_setup_code"] == "import math"
    assert len(samples[4].payload["challenge_test_list"]) == 2
    # The fixture is realistic: every reference solution passes its own tests.
    for s in samples:
        namespace: dict = {}
        exec(s.payload["test_setup_code"], namespace)
        exec(s.reference, namespace)
        for test in s.payload["test_list"] + s.payload["challenge_test_list"]:
            exec(test, namespace)


def test_cnn_dailymail_from_the_fixture_and_as_parquet(fixtures_dir, tmp_path):
    jsonl = fixtures_dir / "cnn_dailymail_sample.jsonl"
    samples = load_dataset_samples("cnn_dailymail", path=str(jsonl))
    assert len(samples) == 3
    first = samples[0]
    assert first.task == "summarization" and len(first.sample_id) == 40
    assert first.turns[0].startswith("Summarize the following news article in three or four sentences.\n\n(CNN)")
    assert first.reference.count("\n") == 2  # one highlight sentence per line, as ROUGE-Lsum wants

    # A hub parquet file works as dataset.path too.
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test-00000-of-00001.parquet")
    assert load_dataset_samples("cnn_dailymail", path=str(tmp_path / "test-00000-of-00001.parquet")) == samples


# The hub client reads HF_HUB_OFFLINE / HF_DATASETS_OFFLINE when `datasets` is first imported, so
# setting them in this process would not reach an already-imported client: a fresh interpreter
# (started with the monkeypatched environment) gives a real, isolated offline run.
_PROBE = textwrap.dedent(
    """
    import json, sys
    from lade_bench.datasets import DatasetUnavailableError, load_dataset_samples
    out = {}
    out["n_local"] = len(load_dataset_samples("cnn_dailymail", path=sys.argv[1]))
    out["hub_client_imported_by_local_load"] = "datasets" in sys.modules
    try:
        load_dataset_samples("gsm8k", limit=3)
    except DatasetUnavailableError as err:
        out["error"] = str(err)
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def offline_probe(fixtures_dir, tmp_path_factory):
    home = tmp_path_factory.mktemp("hf_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        mp.setenv("HF_HOME", str(home))  # an empty cache: nothing can be served from an earlier run
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(fixtures_dir / "cnn_dailymail_sample.jsonl")],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=home,
        )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_local_path_never_touches_the_hub_client(offline_probe):
    assert offline_probe["n_local"] == 3
    assert offline_probe["hub_client_imported_by_local_load"] is False


def test_unreachable_hub_says_how_to_use_a_local_copy(offline_probe):
    message = offline_probe.get("error")
    assert message, "loading gsm8k from the hub offline should raise DatasetUnavailableError"
    assert "dataset.path=" in message
    assert "openai/gsm8k" in message and "'gsm8k'" in message
