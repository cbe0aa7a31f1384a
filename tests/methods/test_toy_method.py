"""A method registered in this test only runs a real cell, the report, the tuner's checks and the bench.

The toy method is greedy AR by a plain loop without a KV cache (every step re-reads the whole
sequence). Nothing outside this file names it: if a module kept its own list of arms (the plan
checks, the headroom of the prompt budget, the row schema, the report's order, labels or colours,
the tuner's baselines, the bench), one of the steps below fails.
"""

from __future__ import annotations

import json
import time

import pytest
import torch
from hydra import compose, initialize_config_dir
from matplotlib import colormaps
from matplotlib.colors import to_hex

from lade_bench import bench
from lade_bench.decoding import DecodeResult
from lade_bench.decoding.core.timing import device_synchronizer, model_device
from lade_bench.methods import GenerationRequest, Method, method_color, method_names, register, unregister
from lade_bench.report import build_report
from lade_bench.report.figures import draw_speedup_bars
from lade_bench.results import load_rows
from lade_bench.runner import plan_cell, register_configs, run_cell
from lade_bench.runner.plan import CellConfigError
from lade_bench.tune.config import TuneConfigError, register_tune_configs, tune_settings

from ..runner.conftest import CONF_DIR, TINY

TOY = "toy_no_cache_ar"
TOY_LABEL = "AR without cache (toy)"
# A colour no registered method has (register() refuses a taken one), so a new method may take any.
TAKEN = {method_color(name) for name in method_names()}
TOY_COLOR = next(colour for colour in map(to_hex, colormaps["tab20"].colors) if colour not in TAKEN)


def no_cache_greedy(request: GenerationRequest) -> DecodeResult:
    """Greedy AR, one forward over the whole sequence per token (no KV cache): exact, and slow."""
    model, stops = request.model, set(request.stop_ids)
    device = model_device(model)
    sync = device_synchronizer(device)
    tokens: list[int] = []
    step_tokens: list[int] = []
    sync()
    started = time.perf_counter()
    with torch.no_grad():
        while len(tokens) < request.max_new_tokens:
            sequence = [*request.prompt_ids, *tokens]
            logits = model(input_ids=torch.tensor([sequence], device=device), use_cache=False).logits
            step_tokens.append(len(sequence))  # what this forward costs: the whole sequence again
            tokens.append(int(logits[0, -1].argmax()))
            if tokens[-1] in stops:
                break
    sync()
    wall = time.perf_counter() - started
    # One forward per token: steps == new tokens, every accept length 1 (compression exactly 1.0).
    return DecodeResult(tokens, len(tokens), [1] * len(tokens), wall, method=TOY, step_tokens=step_tokens)


@pytest.fixture
def toy_method():
    """The toy method, registered for this test only."""
    register(
        Method(TOY, no_cache_greedy, label=TOY_LABEL, color=TOY_COLOR, supports_sampling=False, tuner_baseline=True)
    )
    yield TOY
    unregister(TOY)


def _compose(overrides: list[str], config: str = "config"):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config, overrides=overrides)


def test_a_registered_toy_method_runs_a_cell_the_report_the_tuner_checks_and_the_bench(toy_method, tmp_path):
    register_configs()
    assert method_names()[-1] == toy_method  # registered after the built-ins: last in every table

    # A real cell: its rows, their pairing with AR and the summary.
    cfg = _compose([*TINY, f"arms=[ar,lookahead,{toy_method}]", "warmup=1", f"output_root={tmp_path}"])
    outcome = run_cell(cfg)
    rows = load_rows(outcome.cell_dir)
    toy_rows = rows[rows["arm"] == toy_method]
    assert len(toy_rows) == 2 and toy_rows["error"].isna().all()  # both MT-Bench turns
    assert toy_rows["matches_ar"].all()  # float64 tiny model: exactly AR's tokens
    assert (toy_rows["compression_ratio"] == 1.0).all()
    assert outcome.summary["arms"][toy_method]["speedup"] > 0

    # The plan reads the toy's capabilities (greedy only) and the registry's names.
    with pytest.raises(CellConfigError, match=f"the {toy_method} arm is greedy-only"):
        plan_cell(_compose([*TINY, f"arms=[ar,{toy_method}]", "sampling=temperature_1"]))
    with pytest.raises(CellConfigError, match=f"did you mean '{toy_method}'"):
        plan_cell(_compose([*TINY, f"arms=[ar,{toy_method}x]"]))

    # The report: its order, label and colour.
    report = build_report(outcome.cell_dir.parent, tmp_path / "report", html=False)
    summary = report.sweep.summary
    assert list(summary["arm"]) == ["ar", "lookahead", toy_method]
    tables = "".join(path.read_text() for path in (tmp_path / "report" / "tables").glob("*.md"))
    assert TOY_LABEL in tables
    figure = draw_speedup_bars(report.sweep.headline, "speedup", "context")  # the sweep the report loaded
    bars = {bar.get_label(): bar for ax in figure.axes for bar in ax.containers}
    assert to_hex(bars[TOY_LABEL].patches[0].get_facecolor()) == TOY_COLOR

    # The tuner may validate against it, because its entry says so.
    register_tune_configs()
    tune_cfg = _compose([*TINY, f"tune.baselines=[{toy_method}]"], config="tune")
    assert tune_settings(tune_cfg).baselines == (toy_method,)
    with pytest.raises(TuneConfigError, match=toy_method):
        tune_settings(_compose([*TINY, "tune.baselines=[ar_tp]"], config="tune"))

    # The bench, on the embedded SmolLM2.
    argv = ["--methods", "ar", toy_method, "--prompts", "1", "--max-new-tokens", "4", "--warmup", "0"]
    record = json.loads(bench.main([*argv, "--output", str(tmp_path / "bench")]).read_text())
    assert [entry["arm"] for entry in record["summary"]] == ["ar", toy_method]
    assert [len(record["runs"][arm]) for arm in ("ar", toy_method)] == [1, 1]
