"""``report.headline``: each sweep declares, before it runs, the cell its main-table entry reports."""

from __future__ import annotations

import itertools

import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from lade_bench.report.sweep import declared_headline
from lade_bench.runner import plan_cell

SWEEPS = ("ablation_wg", "ablation_n", "prompt_ref", "sampling", "main", "smoke")
HEADLINE = ("ngram", "window", "guesses", "prompt_as_reference", "verification")


def _cells(compose_cfg, sweep: str):
    cfg = compose_cfg([f"+sweep={sweep}"], hydra=True)
    params = dict(cfg.hydra.sweeper.params)
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
    axes = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] for o in parsed]
    return [compose_cfg([f"+sweep={sweep}", *cell]) for cell in itertools.product(*axes)]


def test_no_headline_by_default(compose_cfg):
    assert compose_cfg([]).report.headline is None


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_sweep_declares_a_headline_that_is_one_of_its_cells(compose_cfg, sweep):
    cells = _cells(compose_cfg, sweep)
    headline = OmegaConf.to_container(cells[0].report.headline)
    assert set(headline) == set(HEADLINE)
    matching = [c for c in cells if all(c.lookahead[k] == headline[k] for k in HEADLINE)]
    # every (model, dataset, sampling) of the grid has its declared cell, so no selection is needed
    groups = {(c.model.name, c.dataset.name, c.sampling.name) for c in cells}
    assert {(c.model.name, c.dataset.name, c.sampling.name) for c in matching} == groups


def test_headline_is_written_to_config_yaml_and_read_back(compose_cfg):
    cfg = compose_cfg(["+sweep=ablation_wg"])
    text = OmegaConf.to_yaml(cfg, resolve=True)  # what the runner writes as config.yaml
    assert declared_headline(text) == {
        "ngram": 5,
        "window": 15,
        "guesses": 15,
        "prompt_as_reference": False,
        "verification": "flat",
    }
    assert declared_headline(yaml.safe_dump({"report": {"headline": None}})) is None
    assert declared_headline(None) is None


def test_headline_is_not_part_of_the_cell_id(compose_cfg):
    base = plan_cell(compose_cfg(["+sweep=ablation_wg"])).cell_id
    other = plan_cell(compose_cfg(["+sweep=ablation_wg", "report.headline.window=7"])).cell_id
    assert base == other


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("report.headline.windw=3", "windw"),
        ("report.headline.window=abc", "could not be converted to Integer"),
    ],
)
def test_headline_typos_fail_at_composition(compose_cfg, override, message):
    with pytest.raises((ConfigCompositionException, ConfigKeyError, ValidationError)) as info:
        compose_cfg(["+sweep=ablation_wg", override])
    assert message in str(info.value) or message in str(info.value.__cause__)
