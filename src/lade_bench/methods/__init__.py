"""The method (arm) registry: one entry per decoding method; everything else reads it.

Importing the package registers the built-in methods (``builtin``) and the drafters it finds in
``methods/drafters/`` (one declaration each, ``methods/drafter_method.py``: a new drafter is its engine file
and its declaration, with no list to extend). Any other method is one :class:`Method` entry and its
generate function (``docs/adding_a_method.md``)::

    from lade_bench.methods import Method, register
    register(Method("my_method", my_generate, label="My method", color="#rrggbb"))  # a colour no method has
"""

from lade_bench.methods.builtin import register_builtin_methods
from lade_bench.methods.registry import (
    DRAFT,
    PIPELINE_PARALLEL,
    REFERENCE,
    REPLICA,
    STANDARD_PATH_REFERENCE,
    TENSOR_PARALLEL,
    CellFacts,
    GenerationRequest,
    Method,
    Settings,
    UnknownMethodError,
    bind_method,
    configuration_label,
    every_method_arms,
    get_method,
    is_registered,
    method_color,
    method_label,
    method_names,
    method_rank,
    method_state_text,
    methods_where,
    must_match_ar,
    register,
    registered_methods,
    resolve_settings,
    run_generation,
    runs_on_one_model,
    sort_methods,
    unknown_method_message,
    unregister,
)

register_builtin_methods()

__all__ = [
    "DRAFT",
    "PIPELINE_PARALLEL",
    "REFERENCE",
    "REPLICA",
    "STANDARD_PATH_REFERENCE",
    "TENSOR_PARALLEL",
    "CellFacts",
    "GenerationRequest",
    "Method",
    "Settings",
    "UnknownMethodError",
    "bind_method",
    "configuration_label",
    "every_method_arms",
    "get_method",
    "is_registered",
    "method_color",
    "method_label",
    "method_names",
    "method_rank",
    "method_state_text",
    "methods_where",
    "must_match_ar",
    "register",
    "registered_methods",
    "resolve_settings",
    "run_generation",
    "runs_on_one_model",
    "sort_methods",
    "unknown_method_message",
    "unregister",
]
