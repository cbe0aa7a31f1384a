"""``report.headline``: each sweep declares, before it runs, the cell its main-table entry reports."""

from __future__ import annotations

import pytest
import yaml
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from lade_bench.report.sweep import declared_headline
from lade_bench.runner import plan_cell


def test_no_headline_by_default(compose_cfg):
    assert compose_cfg([]).report.headline is None


# That every sweep declares a headline that is one of its cells is checked in test_runner_configs, on the
# grids it composes for its own per-sweep test (composing every cell of every sweep twice cost ~8 CPU-s).


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
