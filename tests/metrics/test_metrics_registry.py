import pytest

from lade_bench.metrics.registry import METRICS, MetricSpec, get_metric
from lade_bench.metrics.speed import compression_ratio, speedup


def test_declared_metrics_have_an_aggregation():
    assert get_metric("speedup").aggregation == "ratio_of_sums"
    assert get_metric("rouge1").aggregation == "mean"
    assert all(spec.name == name for name, spec in METRICS.items())


def test_aggregations_agree_with_metric_functions():
    ar, lade = [1.0, 3.0], [1.0, 2.0]
    assert get_metric("speedup").aggregate(ar, lade) == pytest.approx(speedup(ar, lade))
    assert get_metric("compression_ratio").aggregate([10, 20], [5, 5]) == pytest.approx(
        compression_ratio([10, 20], [5, 5])
    )
    assert get_metric("pass@1").aggregate([True, False, False, True]) == pytest.approx(0.5)


def test_unknown_metric_suggests_close_names():
    with pytest.raises(KeyError, match="did you mean 'speedup'"):
        get_metric("speedupp")


def test_spec_validation():
    with pytest.raises(ValueError, match="needs 2 column"):
        MetricSpec("x", "ratio_of_sums", ("a",))
    with pytest.raises(ValueError, match="unknown aggregation"):
        MetricSpec("x", "median", ("a",))
    with pytest.raises(ValueError, match="got 1 array"):
        get_metric("speedup").aggregate([1.0])
    with pytest.raises(ValueError, match="is zero"):
        get_metric("tokens_per_s").aggregate([1.0], [0.0])
