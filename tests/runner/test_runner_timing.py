"""The one timing harness: order, warm-up, pairing and the deadline (runner, tuner, bench, gpu_check)."""

from __future__ import annotations

import time

from lade_bench.runner.timing import arm_order, run_paired, warm_up


def test_order_flips_per_unit_so_each_arm_has_the_same_mean_position():
    arms = ["ar", "a", "b", "c"]
    orders = [arm_order(arms, position) for position in range(4)]
    assert orders[0] == arms and orders[1] == arms[::-1] and orders[2] == arms
    for arm in arms:
        assert sum(order.index(arm) for order in orders[:2]) == len(arms) - 1


def test_warm_up_runs_every_arm_per_round_in_config_order():
    calls = []
    warm_up(["ar", "x"], calls.append, 2)
    assert calls == ["ar", "x", "ar", "x"]


def test_run_paired_warms_up_on_the_first_unit_then_pairs_every_unit():
    calls = []

    def arm(name):
        return lambda unit: calls.append((name, unit)) or f"{name}{unit}"

    runs = run_paired({"ar": arm("ar"), "x": arm("x")}, [0, 1, 2], warmup=1)
    assert calls[:2] == [("ar", 0), ("x", 0)]  # the warm-up round
    assert calls[2:] == [("ar", 0), ("x", 0), ("x", 1), ("ar", 1), ("ar", 2), ("x", 2)]
    assert runs.results == {"ar": ["ar0", "ar1", "ar2"], "x": ["x0", "x1", "x2"]}
    assert runs.units_done == 3 and not runs.stopped_early


def test_a_passed_deadline_stops_between_units_never_inside_one():
    runs = run_paired({"ar": lambda u: u, "x": lambda u: u}, [0, 1, 2], deadline=time.monotonic() - 1)
    assert runs.results == {"ar": [0], "x": [0]}  # the first unit always runs, whole
    assert runs.units_done == 1 and runs.stopped_early
