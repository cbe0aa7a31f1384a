"""Every option of every group and every sweep cell composes and passes the pre-load checks."""

from __future__ import annotations

import itertools

import pytest
import torch
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from lade_bench.conf import PACKAGE_CONF_DIR
from lade_bench.datasets import available_datasets
from lade_bench.decoding import DecodingConfigError
from lade_bench.methods import method_names
from lade_bench.models.loading import MIN_CPU_FLEX_HEAD_DIM, check_cpu_flex_head_size, load_model
from lade_bench.models.tiny import TINY_ARCHITECTURES, tiny_model_from_config
from lade_bench.results import cell_id
from lade_bench.runner import plan_cell
from lade_bench.runner.plan import CellConfigError

from .conftest import CONF_DIR, option_names

GROUPS = ("model", "dataset", "lookahead", "sampling")
SWEEPS = ("ablation_wg", "ablation_n", "prompt_ref", "sampling", "main", "smoke")
HEADLINE = ("ngram", "window", "guesses", "prompt_as_reference", "verification")


def test_default_config_is_the_quick_cpu_look(compose_cfg):
    cfg = compose_cfg([])
    assert cfg.model.source.value == "embedded"
    assert cfg.dataset.name == "mt_bench" and cfg.dataset.limit == 3
    assert (cfg.lookahead.ngram, cfg.lookahead.window, cfg.lookahead.guesses) == (5, 7, 7)
    assert cfg.lookahead.prompt_as_reference is True
    assert cfg.sampling.do_sample is False
    assert list(cfg.arms) == ["ar", "lookahead"]
    assert cfg.output_root == "runs" and cfg.sweep_name == "single"


@pytest.mark.parametrize("group", GROUPS)
def test_every_group_option_composes_and_plans(compose_cfg, group):
    options = option_names(group)
    assert options, f"conf/{group}/ is empty"
    for option in options:
        cfg = compose_cfg([f"{group}={option}"])
        plan = plan_cell(cfg)  # all value checks, no loading
        assert plan.cell_id and plan.cell_dir.parent == plan.sweep_root


def test_dataset_group_covers_the_registry():
    assert option_names("dataset") == available_datasets()


def test_model_group_has_the_required_models():
    assert {"smollm2", "tiny_llama", "llama2_7b_chat", "codellama_7b_instruct", "vicuna_7b"} <= set(
        option_names("model")
    )


@pytest.mark.parametrize("size", ["0.5b", "1.5b"])
def test_qwen_coder_models_compose_as_embedded_chat_models_and_plan(compose_cfg, size):
    # Issue 63: the real instruct models by name, planned without their (large, on-request) download.
    from lade_bench.models.loading import DEFAULT_SETUP_MODELS, EMBEDDED_MODELS, model_config_problem, tokenizer_source

    cfg = compose_cfg([f"model=qwen2.5-coder-{size}", "model_cache_dir=/nonexistent/cache"])
    model = cfg.model
    assert (model.name, model.source.value, model.embedded) == (
        f"qwen2.5-coder-{size}-instruct",
        "embedded",
        f"qwen2.5-coder-{size}",
    )
    assert model.chat is True and model.chat_template is None  # the GGUF's own ChatML template
    assert model_config_problem(model, "model") is None and model.embedded in EMBEDDED_MODELS
    assert model.embedded not in DEFAULT_SETUP_MODELS  # fetched on request only
    assert tokenizer_source(model) == f"embedded:qwen2.5-coder-{size}"
    plan = plan_cell(cfg)  # every pre-load check passes: the download is needed only at load
    assert plan.cell_dir.name.startswith(f"qwen2.5-coder-{size}-instruct")


def test_sweep_files_are_exactly_the_paper_experiments():
    assert set(option_names("sweep")) == {
        *SWEEPS,
        "lp_scaling",
        "assisted",
        "baselines",
        "batch_invariant",
        "spec_bench",
        "real_text_code",
    }


def test_real_text_code_sweep_is_the_declared_humaneval_cell_of_the_1_5b_model(compose_cfg):
    """Issue 63's code cell: the real 1.5B instruct model under its chat template, the declared arms at their
    papers' defaults (Spec-Bench's lookahead, prompt lookup's n-gram of 3), HumanEval's first 40 in file order."""
    plan = plan_cell(compose_cfg(["+sweep=real_text_code", "model_cache_dir=/nonexistent/cache"]))
    assert plan.sweep_root.name == "real_text_code" and plan.dataset_spec.name == "humaneval"
    assert plan.arms == ("ar", "lookahead", "prompt_lookup", "suffix_decoding")
    cfg = plan.cfg
    assert cfg.model.name == "qwen2.5-coder-1.5b-instruct" and cfg.model.chat is True
    assert (cfg.lookahead.ngram, cfg.lookahead.window, cfg.lookahead.guesses) == (5, 7, 7)
    assert cfg.prompt_lookup.max_ngram_size == 3 and cfg.dataset.limit == 40 and cfg.dataset.shuffle_seed is None


def test_batch_invariant_sweep_is_the_baselines_plan_in_bfloat16_on_the_path(compose_cfg):
    """The same draw, sample count and tokens as the baselines sweep, in bfloat16 eager on the batch-invariant
    path, with plain AR (ar_standard) beside the path's AR; the tuned preset's cell keeps the path."""
    baselines = compose_cfg(["+sweep=baselines", "model=smollm2"])
    plan = plan_cell(compose_cfg(["+sweep=batch_invariant", "model=smollm2"]))
    assert plan.sweep_root.name == "batch_invariant" and plan.arms == (
        "ar",
        "ar_standard",
        "lookahead",
        "prompt_lookup",
    )
    cfg = compose_cfg(
        ["+sweep=batch_invariant", "model=smollm2", "lookahead=tuned/cpu-smollm2-135m-instruct-humaneval"]
    )
    assert (cfg.dtype.value, cfg.compile, cfg.step_path.value) == ("bfloat16", False, "batch_invariant")
    for key in ("limit", "shuffle_seed", "offset"):
        assert cfg.dataset[key] == baselines.dataset[key]
    assert cfg.max_new_tokens == baselines.max_new_tokens and plan.semantic["step_path"] == "batch_invariant"


def test_baselines_sweep_plans_one_cell_per_dtype_and_mode(compose_cfg):
    settings = [[f"dtype={d}", f"compile={c}"] for d in ("float32", "bfloat16") for c in ("false", "true")]
    plans = [plan_cell(compose_cfg(["+sweep=baselines", "model=tiny_llama", *s])) for s in settings]
    assert len({plan.cell_id for plan in plans}) == 4
    assert all(
        plan.sweep_root.name == "baselines" and plan.arms == ("ar", "lookahead", "prompt_lookup") for plan in plans
    )
    assert [plan.compiled for plan in plans] == [False, True, False, True]
    tuned = compose_cfg(
        ["+sweep=baselines", "lookahead=tuned/cpu-smollm2-135m-instruct-mt_bench", "arms=[ar,lookahead]"]
    )
    preset_file = PACKAGE_CONF_DIR / "lookahead" / "tuned" / "cpu-smollm2-135m-instruct-mt_bench.yaml"
    preset = yaml.safe_load(preset_file.read_text())
    assert (tuned.lookahead.ngram, tuned.lookahead.window, tuned.lookahead.guesses) == (
        preset["ngram"],
        preset["window"],
        preset["guesses"],
    )
    assert (tuned.report.headline.ngram, tuned.report.headline.window) == (5, 7)  # the declared headline stays
    # Past the tuner's 4 probe + 10 held-out samples of the same draw.
    assert (tuned.dataset.shuffle_seed, tuned.dataset.offset, tuned.dataset.limit) == (0, 14, 20)
    assert all(plan.semantic["dataset"]["offset"] == 14 for plan in plans)


def test_assisted_sweep_is_one_declared_cell_with_a_draft(compose_cfg):
    """One cell (no grid): the 68M Llama drafting for Llama-2-7B on a GPU; the CPU recipe swaps both."""
    gpu = plan_cell(compose_cfg(["+sweep=assisted"]))
    assert gpu.sweep_root.name == "assisted" and "assisted" in gpu.arms
    assert gpu.semantic["assistant"]["model"]["name_or_path"] == "JackFram/llama-68m"
    cpu_recipe = ["model=gemma3_270m", "model@assistant.model=smollm2", "lookahead=default", "dataset.limit=20"]
    cfg = compose_cfg(["+sweep=assisted", *cpu_recipe, "report.headline.window=7", "report.headline.guesses=7"])
    plan = plan_cell(cfg)
    assert plan.semantic["assistant"]["model"]["embedded"] == "smollm2" and plan.cfg.model.embedded == "gemma3_270m"
    headline = cfg.report.headline
    la = plan.settings["lookahead"]
    assert (headline.ngram, headline.window, headline.guesses) == (la.ngram, la.window, 7)


def test_lp_scaling_sweep_plans_one_cell_per_device_count(compose_cfg):
    """Its axis is torchrun's process count (one launch per count, scripts/lp_scaling.sh), not a Hydra grid."""
    cell_ids = set()
    for devices in (1, 2, 4, 8):
        arms = "[ar,lookahead]" if devices == 1 else "[ar,lookahead,ar_tp]"
        plan = plan_cell(compose_cfg(["+sweep=lp_scaling", f"lookahead.devices={devices}", f"arms={arms}"]))
        assert plan.sweep_root.name == "lp_scaling" and plan.dataset_spec.name == "classeval"
        la = plan.settings["lookahead"]
        assert (la.ngram, la.window, la.guesses) == (5, 15, 15)
        cell_ids.add(plan.cell_id)
    assert len(cell_ids) == 4


@pytest.fixture(scope="module")
def sweep_grid():
    """``sweep_grid(sweep)``: (the sweep's config with Hydra's, its axes, the composed config of every cell),
    composed once per module: the plan test and the headline test below read the same grids."""
    grids: dict[str, tuple] = {}

    def _grid(sweep: str):
        if sweep not in grids:
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
                cfg = compose("config", overrides=[f"+sweep={sweep}"], return_hydra_config=True)
                params = dict(cfg.hydra.sweeper.params)
                parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
                axes = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] for o in parsed]
                cells = [compose("config", overrides=[f"+sweep={sweep}", *cell]) for cell in itertools.product(*axes)]
            grids[sweep] = (cfg, axes, cells)
        return grids[sweep]

    return _grid


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_sweep_cell_composes_and_plans(sweep_grid, sweep):
    cfg, axes, cells = sweep_grid(sweep)
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN"
    assert cfg.sweep_name == sweep
    assert axes, f"sweep {sweep} has no grid"
    assert all(len(axis) >= 2 for axis in axes), f"{sweep}: every axis should have at least two values"
    cell_ids = set()
    for cell in cells:
        plan = plan_cell(cell)
        cell_ids.add(plan.cell_id)
        assert plan.sweep_root.name == sweep
    assert len(cell_ids) == len(list(itertools.product(*axes))), "two cells of one sweep share an id"


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_sweep_declares_a_headline_that_is_one_of_its_cells(sweep_grid, sweep):
    """``report.headline`` (see test_runner_report_config): the cell each sweep's main-table entry reports."""
    _, _, cells = sweep_grid(sweep)
    headline = OmegaConf.to_container(cells[0].report.headline)
    assert set(headline) == set(HEADLINE)
    matching = [c for c in cells if all(c.lookahead[k] == headline[k] for k in HEADLINE)]
    # every (model, dataset, sampling) of the grid has its declared cell, so no selection is needed
    groups = {(c.model.name, c.dataset.name, c.sampling.name) for c in cells}
    assert {(c.model.name, c.dataset.name, c.sampling.name) for c in matching} == groups


def test_ablation_wg_has_the_paper_corners(compose_cfg):
    cfg = compose_cfg(["+sweep=ablation_wg"], hydra=True)
    params = cfg.hydra.sweeper.params
    assert "1" in str(params["lookahead.window"]).split(",")
    assert "1" in str(params["lookahead.guesses"]).split(",")
    assert cfg.lookahead.ngram == 5


def test_sweep_files_yield_to_command_line_overrides(compose_cfg):
    # The CPU recipe of every sweep: the embedded model and a limit on the command line win.
    cfg = compose_cfg(["+sweep=ablation_wg", "model=smollm2", "dataset.limit=2", "max_new_tokens=16"])
    assert cfg.model.name == "smollm2-135m-instruct"
    assert cfg.dataset.limit == 2 and cfg.max_new_tokens == 16
    assert cfg.lookahead.prompt_as_reference is False  # still the sweep's own setting


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model=xyz", "Could not find 'model/xyz'"),
        ("dataset=xyz", "Could not find 'dataset/xyz'"),
        ("+sweep=nope", "Could not find 'sweep/nope'"),
    ],
)
def test_unknown_names_list_the_valid_ones(compose_cfg, override, message):
    group = override.lstrip("+").split("=")[0]
    with pytest.raises(MissingConfigException) as info:
        compose_cfg([override])
    text = str(info.value)
    assert message in text
    for option in option_names(group):
        assert option in text


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("lookahead.windw=3", "Key 'windw' not in 'LookaheadConfig'"),
        ("lookahead.window=abc", "could not be converted to Integer"),
        ("sampling.temperature=hot", "could not be converted to Float"),
        ("device=tpu", "expected one of [auto, cpu, cuda]"),
        ("dtype=float8", "expected one of"),
        ("model.source=s3", "expected one of [embedded, tiny, hf]"),
    ],
)
def test_typos_and_wrong_types_fail_at_composition(compose_cfg, override, message):
    with pytest.raises((ConfigCompositionException, ConfigKeyError, ValidationError)) as info:
        compose_cfg([override])
    assert message in str(info.value) or message in str(info.value.__cause__)


@pytest.mark.parametrize(
    ("override", "error", "message"),
    [
        ("lookahead.ngram=1", DecodingConfigError, "ngram (N)=1 is not allowed: use an integer >= 2"),
        ("lookahead.window=0", DecodingConfigError, "window (W)=0"),
        ("lookahead.guesses=-1", DecodingConfigError, "guesses (G)=-1"),
        (
            "lookahead.verification=tree",
            DecodingConfigError,
            "verification='tree' is not allowed: use one of flat, trie",
        ),
        ("sampling=temperature_1 sampling.temperature=0", DecodingConfigError, "temperature=0"),
        ("sampling.top_p=1.5", DecodingConfigError, "top_p=1.5"),
        ("max_new_tokens=0", DecodingConfigError, "max_new_tokens=0"),
        ("arms=[lookahead]", CellConfigError, "lacks 'ar'"),
        ("arms=[ar,ar]", CellConfigError, "twice"),
        # Arms are the method registry's names (it grows at run time), so the plan checks them, not Hydra.
        (
            "arms=[ar,foo]",
            CellConfigError,
            f"'foo' is not a decoding method; expected one of [{', '.join(method_names())}]",
        ),
        ("arms=[ar,lookahed]", CellConfigError, "did you mean 'lookahead'?"),
        ("sampling=temperature_1 arms=[ar,jacobi]", CellConfigError, "greedy-only"),
        ("attn_implementation=flash_attention_2", CellConfigError, "custom attention mask"),
        ("repeats=0", CellConfigError, "repeats=0"),
        ("dataset.limit=0", CellConfigError, "dataset.limit=0"),
        ("dataset.offset=-1", CellConfigError, "dataset.offset=-1 is not allowed: use an integer >= 0"),
        # Each method checks its own settings (its registry entry's refuse), only when it runs.
        ("prompt_lookup.num_tokens=0 arms=[ar,prompt_lookup]", CellConfigError, "prompt_lookup.num_tokens=0"),
        ("prompt_lookup.max_ngram_size=0 arms=[ar,prompt_lookup]", CellConfigError, "max_ngram_size=0 is not"),
        ("jacobi.block_size=0 arms=[ar,jacobi]", CellConfigError, "jacobi.block_size=0 is not allowed"),
        ("dataset.name=mtbench", ValueError, "Did you mean 'mt_bench'"),
        ("sweep_name=a/b", CellConfigError, "plain folder name"),
    ],
)
def test_bad_values_fail_in_the_plan(compose_cfg, override, error, message):
    cfg = compose_cfg(override.split())
    with pytest.raises(error) as info:
        plan_cell(cfg)
    assert message in str(info.value)


def test_a_method_setting_binds_only_a_cell_that_runs_the_method(compose_cfg):
    """A bad jacobi.block_size is Jacobi's to refuse: a cell without the jacobi arm plans."""
    plan = plan_cell(compose_cfg(["jacobi.block_size=0", "arms=[ar,lookahead]"]))
    assert "jacobi" not in plan.arms


def test_an_offset_makes_another_cell_and_none_keeps_the_old_id(compose_cfg):
    base = plan_cell(compose_cfg([]))
    assert "offset" not in base.semantic["dataset"]
    assert plan_cell(compose_cfg(["dataset.offset=0"])).cell_id == base.cell_id
    shifted = plan_cell(compose_cfg(["dataset.offset=14"]))
    assert shifted.semantic["dataset"]["offset"] == 14 and shifted.cell_id != base.cell_id


def test_flex_attention_is_fine_for_lookahead(compose_cfg):
    plan = plan_cell(compose_cfg(["attn_implementation=flex_attention"]))
    assert plan.semantic["attn_implementation"] == "flex_attention" and "lookahead" in plan.arms


def test_flash_attention_refused_for_lookahead_names_the_allowed_ones(compose_cfg):
    with pytest.raises(CellConfigError) as info:
        plan_cell(compose_cfg(["attn_implementation=flash_attention_2"]))
    assert "'flash_attention_2'" in str(info.value) and "'flex_attention'" in str(info.value)


def test_flex_attention_refused_where_torch_lacks_it(compose_cfg, monkeypatch):
    from lade_bench.decoding.core import checks

    # The plan asks the engine's check when it meets a flex_attention cell (imported then: torch loads late).
    monkeypatch.setattr(checks, "flex_attention_available", lambda: False)
    with pytest.raises(CellConfigError) as info:
        plan_cell(compose_cfg(["attn_implementation=flex_attention", "arms=[ar]"]))
    assert "attn_implementation='flex_attention'" in str(info.value) and "['eager', 'sdpa']" in str(info.value)


def test_flash_attention_is_fine_for_an_ar_only_cell(compose_cfg):
    plan = plan_cell(compose_cfg(["attn_implementation=flash_attention_2", "arms=[ar]"]))
    assert plan.cfg.attn_implementation.name == "flash_attention_2" and list(plan.cfg.arms) == ["ar"]


def test_cell_id_ignores_paths_and_sweep_but_not_parameters(compose_cfg):
    base = plan_cell(compose_cfg([]))
    elsewhere = plan_cell(compose_cfg(["output_root=/tmp/elsewhere", "sweep_name=other", "warmup=3"]))
    assert elsewhere.cell_id == base.cell_id
    assert plan_cell(compose_cfg(["lookahead.window=8"])).cell_id != base.cell_id
    assert plan_cell(compose_cfg(["sampling=temperature_1"])).cell_id != base.cell_id
    assert plan_cell(compose_cfg(["dataset.limit=4"])).cell_id != base.cell_id


def test_flat_verification_keeps_the_cell_ids_recorded_before_the_trie_layout(compose_cfg):
    flat = plan_cell(compose_cfg(["lookahead.verification=flat"]))
    # Before the option existed the lookahead group had exactly these keys, all hashed (the
    # `lookahead.verification` entry of runner/id_compat.py's table).
    assert set(flat.semantic["lookahead"]) == {"ngram", "window", "guesses", "prompt_as_reference"}
    assert flat.cell_id == cell_id(flat.semantic)
    trie = plan_cell(compose_cfg(["lookahead.verification=trie"]))
    assert trie.semantic["lookahead"]["verification"] == "trie"
    assert trie.cell_id != flat.cell_id
    assert "reftrie-" in trie.cell_dir.name and "reftrie" not in flat.cell_dir.name
    assert trie.settings["lookahead"].verification == "trie"


def test_vicuna_template_renders_fastchat_format(compose_cfg):
    from jinja2 import Template

    template = compose_cfg(["model=vicuna_7b"]).model.chat_template
    messages = [
        {"role": "user", "content": "Hi?"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye?"},
    ]
    text = Template(template).render(messages=messages, bos_token="<s>", eos_token="</s>", add_generation_prompt=True)
    system = (
        "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
        "detailed, and polite answers to the user's questions."
    )
    assert text == f"<s>{system} USER: Hi? ASSISTANT: Hello.</s>USER: Bye? ASSISTANT:"


def test_flex_attention_on_the_cpu_refuses_a_head_size_its_fused_kernel_gets_wrong(compose_cfg):
    cfg = compose_cfg(["model=tiny_llama", "attn_implementation=flex_attention", "dtype=float32"])
    with pytest.raises(ValueError) as info:
        load_model(cfg.model, torch.device("cpu"), torch.float32, plan_cell(cfg).semantic["attn_implementation"])
    message = str(info.value)
    assert "head size of at least 32" in message and "this model's is 8" in message and "'sdpa'" in message
    # A real head size passes, and so does the tiny one under SDPA or off the CPU's fused kernel.
    config = TINY_ARCHITECTURES["llama"](128, 512)
    config.head_dim = MIN_CPU_FLEX_HEAD_DIM
    wide = tiny_model_from_config(
        config, seed=0, dtype=torch.float32, attn_implementation="sdpa", init_scale=1.0, eager_experts=False
    )
    check_cpu_flex_head_size(wide, torch.device("cpu"), "flex_attention")
    narrow, _ = load_model(cfg.model, torch.device("cpu"), torch.float32, "sdpa")
    check_cpu_flex_head_size(narrow, torch.device("meta"), "flex_attention")
    # A pipeline loads on the CPU and runs on CUDA: judged where it runs, the tiny head size loads.
    piped, _ = load_model(cfg.model, torch.device("cpu"), torch.float32, "flex_attention", runs_on=torch.device("cuda"))
    assert piped.config._attn_implementation == "flex_attention"
