"""The ``ar_standard`` arm (issue 68): AR on the standard step path beside a batch-invariant cell's AR.

Refused, before any model loads, in a cell on the standard path (there it would be the ``ar`` arm);
left out of the cells of every method and of the exactness grid (``Method.exact``). Its command-line
cell, with the speedups against the faster AR, runs in ``test_runner_step_path.py``.
"""

from __future__ import annotations

import pytest

from lade_bench.methods import STANDARD_PATH_REFERENCE, every_method_arms, get_method, must_match_ar
from lade_bench.runner.plan import plan_cell

from .conftest import TINY


def test_a_cell_on_the_standard_path_refuses_the_arm_in_one_line(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, "dtype=bfloat16", "arms=[ar,ar_standard,lookahead]", f"output_root={tmp_path}"])
    with pytest.raises(ValueError) as refused:
        plan_cell(cfg)
    assert str(refused.value).endswith(
        "the ar_standard arm times AR on the standard step path beside a step_path=batch_invariant cell's AR; "
        "with step_path=standard it is the ar arm: drop it, or set step_path=batch_invariant"
    )


def test_the_arm_is_a_timing_reference_not_a_method_that_must_match():
    method = get_method(STANDARD_PATH_REFERENCE)
    assert not method.exact and not must_match_ar(STANDARD_PATH_REFERENCE)
    assert must_match_ar("lookahead") and must_match_ar("an_arm_of_another_version")
    assert STANDARD_PATH_REFERENCE not in every_method_arms()
