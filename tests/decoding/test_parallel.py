"""Lookahead parallelism on 2 CPU ranks (gloo): exact, same steps, same draws, and no hang on failure.

Ranks are real processes (forked) joined by a real gloo process group; every case of a
group runs in one process group, so the ranks start once per test.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.core.layout import build_step_layout
from lade_bench.decoding.lookahead.shards import build_shard_layout, share

from .helpers import repetitive_prompt
from .lp_ranks import build_model, generate_case, run_rank

# (N, W, G, prompt as reference): uneven column splits (W odd, W=1 leaves rank 1 without columns),
# no verification (G=0), candidates on rank 0 only (G=1), long n-grams and more candidates than columns.
GREEDY_SHAPES = [(5, 7, 7), (2, 1, 0), (3, 1, 2, False), (4, 5, 1), (7, 3, 12), (5, 3, 0), (2, 4, 3)]


def _case(model: str, params, *, prompt_seed: int, sampling: dict | None = None, tokens: int = 48) -> dict:
    return dict(
        model=model,
        prompt=repetitive_prompt(40, seed=prompt_seed),
        params=list(params),
        max_new_tokens=tokens,
        sampling=sampling or {},
        seed=3,
    )


def _run_group(tmp_path: Path, name: str, cases: list[dict], timeout_s: float, ranks: int = 2, models=None):
    """Start ``ranks`` processes on ``cases`` (``models``: built ones by name, inherited through the fork);
    returns (processes, output folder), not yet joined."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "cases.json").write_text(json.dumps(cases))
    # fork: the ranks inherit the imported torch/transformers instead of paying seconds to import them;
    # each sets one intra-op thread before any OpenMP work (the DataLoader-worker rule for forking).
    context = multiprocessing.get_context("fork")
    args = (ranks, str(folder / "init"), str(folder / "cases.json"), str(folder), timeout_s)
    processes = [context.Process(target=run_rank, args=(rank, *args, models)) for rank in range(ranks)]
    for process in processes:
        process.start()
    return processes, folder


def _join(processes, limit_s: float) -> list[int | None]:
    deadline = time.monotonic() + limit_s
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    codes = [process.exitcode for process in processes]
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join()
    return codes


@given(
    levels=st.integers(1, 6),
    columns=st.integers(1, 9),
    candidates=st.integers(0, 6),
    length=st.integers(1, 6),
    ranks=st.integers(1, 5),
)
@settings(max_examples=60, deadline=None)
def test_shards_partition_the_step_and_see_what_one_device_sees(levels, columns, candidates, length, ranks):
    """Columns and candidates are split without overlap or gap, and every kept row of a shard
    attends to exactly the step inputs (with the same positions) it attends to on one device."""
    full = build_step_layout(levels, columns, candidates, length, torch.float32, "cpu")
    allowed = full.mask_block == 0
    seen_columns, seen_candidates = [], []
    for rank in range(ranks):
        shard = build_shard_layout(levels, columns, candidates, length, rank, ranks, torch.float32, "cpu")
        seen_columns += list(shard.columns)
        seen_candidates += list(shard.candidates)
        assert shard.columns == share(columns, ranks, rank)
        inputs = torch.tensor(shard.input_indices)
        assert inputs[0] == 0 and len(set(shard.input_indices)) == len(inputs)
        assert torch.equal(shard.layout.position_offsets, full.position_offsets[inputs])
        local_allowed = shard.layout.mask_block == 0
        for row in shard.layout.logit_rows.tolist():
            # Nothing the row sees on one device is missing from the shard's input.
            assert set(allowed[shard.input_indices[row]].nonzero().flatten().tolist()) <= set(shard.input_indices)
            assert torch.equal(local_allowed[row], allowed[inputs[row]][inputs])
        assert len(shard.layout.last_level_rows) == len(shard.columns)
        assert len(shard.layout.candidate_rows) == len(shard.candidates)
    assert seen_columns == list(range(columns))
    assert seen_candidates == list(range(candidates))


@pytest.mark.slow
def test_two_ranks_emit_single_device_tokens_in_the_same_steps(tmp_path):
    """Greedy: tokens equal single-device lookahead's and AR's, step counts and accept lengths equal
    single-device lookahead's, on tiny Llama, a sliding-window family and SmolLM2; sampling: both
    ranks draw the same tokens as single-device lookahead with the same seed."""
    cases = [_case("tiny:llama", shape, prompt_seed=5) for shape in GREEDY_SHAPES]
    cases.append(_case("tiny:qwen2_sliding", (5, 7, 7), prompt_seed=6))
    cases.append(_case("tiny:gemma3", (4, 3, 2), prompt_seed=8))
    # SmolLM2 once (each of its steps costs ~50x a tiny model's): the real model's uneven split of 7 columns.
    # Its candidates on rank 0 only (G=1) are tiny llama's (4, 5, 1) case.
    cases.append({**_case("smollm2", (5, 7, 7), prompt_seed=0, tokens=24), "prompt": list(range(200, 215)) * 3})
    cases.append(_case("tiny:llama", (4, 5, 3), prompt_seed=5, sampling={"do_sample": True, "temperature": 0.5}))
    cases.append(_case("tiny:llama", (5, 3, 7), prompt_seed=9, sampling={"do_sample": True, "top_k": 5}))
    # Built once here, before the fork: the ranks inherit them instead of loading SmolLM2 twice more.
    models = {name: build_model(name) for name in dict.fromkeys(case["model"] for case in cases)}
    processes, folder = _run_group(tmp_path, "exact", cases, timeout_s=60, models=models)
    assert _join(processes, 240) == [0, 0]
    rank0 = json.loads((folder / "rank0.json").read_text())
    rank1 = json.loads((folder / "rank1.json").read_text())
    assert rank0 == rank1

    ar_tokens: dict[tuple, list[int]] = {}  # the greedy cases of a model share prompts: AR runs once per prompt
    multi_token_steps = {"greedy": 0, "sampling": 0}
    for case, parallel in zip(cases, rank0, strict=True):
        model = models[case["model"]]
        single = generate_case(model, case, None)
        label = f"{case['model']} {case['params']} {case['sampling']}"
        assert parallel == single, label  # tokens, steps and every step's accept length
        sampled = bool(case["sampling"])
        if not sampled:
            key = (case["model"], tuple(case["prompt"]), case["max_new_tokens"])
            if key not in ar_tokens:
                ar_tokens[key] = autoregressive_generate(model, case["prompt"], case["max_new_tokens"]).tokens
            assert parallel["tokens"] == ar_tokens[key], label
        multi_token_steps["sampling" if sampled else "greedy"] += sum(n > 1 for n in parallel["accept_lengths"])
    # Otherwise the comparison would never exercise verification and the cross-rank KV commit.
    assert multi_token_steps["greedy"] > 20 and multi_token_steps["sampling"] > 2


@pytest.mark.slow
def test_a_failing_rank_ends_the_generation_on_the_other_with_a_clear_error(tmp_path):
    """Rank 1 raises, exits or hangs mid-generation (three process groups at once); rank 0 fails with
    LookaheadParallelError, at once or after the collective timeout, instead of waiting forever."""
    timeout_s = 5.0
    groups = {}
    for how in ("raise", "exit", "hang"):
        case = {**_case("tiny:llama", (5, 7, 7), prompt_seed=5), "fault": {"rank": 1, "after_forwards": 4, "how": how}}
        groups[how] = _run_group(tmp_path, how, [case], timeout_s=timeout_s)
    for how, (processes, folder) in groups.items():
        codes = _join(processes[:1], 120)
        _join(processes[1:], 1)  # the hanging rank is killed here
        assert codes[0] not in (0, None), how
        (result,) = json.loads((folder / "rank0.json").read_text())
        assert result["error"].startswith("LookaheadParallelError: rank 0/2:"), how
        assert "another rank failed or exited, or the collective timeout passed" in result["error"]
        # Measured from the start of the generation: the fault comes after 4 forwards of tiny models.
        assert result["seconds"] < timeout_s + 30, how
