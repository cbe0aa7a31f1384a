"""The registry's lookups and errors, and the built-in entries (their names, labels and colours are
what the committed tables and figures show, so they are pinned here)."""

from __future__ import annotations

import pytest

from lade_bench.methods import (
    DRAFT,
    PIPELINE_PARALLEL,
    REPLICA,
    TENSOR_PARALLEL,
    Method,
    UnknownMethodError,
    bind_method,
    get_method,
    method_color,
    method_label,
    method_names,
    methods_where,
    register,
    sort_methods,
    unregister,
)


def test_builtin_methods_keep_the_published_names_labels_colours_and_order():
    entries = [(m, method_label(m), method_color(m)) for m in method_names()]
    assert entries == [
        ("ar", "AR", "#7f7f7f"),
        ("lookahead", "Lookahead", "#1f77b4"),
        ("prompt_lookup", "Prompt lookup", "#ff7f0e"),
        ("jacobi", "Jacobi", "#2ca02c"),
        ("ar_tp", "AR, tensor parallel", "#d62728"),
        ("assisted", "Assisted (draft model)", "#9467bd"),
        ("ar_pp", "AR, pipeline parallel", "#8c564b"),
        ("token_recycling", "Token Recycling", "#e377c2"),
    ]


def test_builtin_capabilities():
    assert methods_where(lambda m: m.custom_mask) == ("lookahead", "jacobi", "token_recycling")
    assert methods_where(lambda m: m.every_rank) == ("lookahead", "ar_tp")
    assert methods_where(lambda m: m.greedy_only) == ("jacobi",)
    assert methods_where(lambda m: m.tuner_baseline) == ("prompt_lookup", "jacobi", "assisted", "token_recycling")
    assert get_method("ar_tp").models == (TENSOR_PARALLEL,)
    assert get_method("assisted").models == (REPLICA, DRAFT) and get_method("assisted").sections == ("assistant",)
    assert get_method("ar_pp").models == (PIPELINE_PARALLEL,)
    assert methods_where(lambda m: m.scaling_label is not None) == ("lookahead", "ar_tp", "ar_pp")


def test_unknown_names_list_the_registered_ones_and_the_closest():
    with pytest.raises(UnknownMethodError) as info:
        get_method("lookahed")
    assert "did you mean 'lookahead'?" in str(info.value)
    assert "expected one of [ar, lookahead, prompt_lookup, jacobi, ar_tp, assisted, ar_pp, token_recycling]" in str(info.value)


def test_register_refuses_bad_and_duplicate_names():
    def generate(request):
        raise AssertionError("never run")

    with pytest.raises(ValueError, match="lowercase"):
        register(Method("My-Method", generate, label="x", color="#000000"))
    with pytest.raises(ValueError, match="already registered"):
        register(Method("ar", generate, label="x", color="#000000"))
    with pytest.raises(ValueError, match="color '#9467BD' is already 'assisted'"):
        register(Method("zz_toy", generate, label="Toy", color="#9467BD"))
    register(Method("zz_toy", generate, label="Toy", color="#000000"))
    try:
        assert method_names()[-1] == "zz_toy"
        assert sort_methods(["zz_toy", "unknown", "jacobi", "ar"]) == ["ar", "jacobi", "zz_toy", "unknown"]
    finally:
        unregister("zz_toy")
    assert "zz_toy" not in method_names()


def test_unregistered_arms_of_old_rows_keep_their_name_and_get_no_colour():
    assert method_label("retired_arm") == "retired_arm" and method_color("retired_arm") is None


def test_bind_refuses_a_method_that_needs_more_than_one_model():
    with pytest.raises(ValueError, match="tensor_parallel"):
        bind_method("ar_tp", model=None, max_new_tokens=4)
