"""Which of the candidate's names the trusted tests see, and as what; stdlib only (supervisor side).

The tests resolve modules and builtins from the supervisor, never from the candidate: only the
names under test come from the candidate's process (as proxies). A candidate's ``class math:
isclose = lambda *a: True`` must not make the tests' ``math.isclose`` its own, nor a candidate's
``sys`` stand in for the module an MBPP test uses without importing it.
"""

import ast
import builtins
import importlib
import sys

# Stdlib modules whose import does something (opens a browser, prints); never imported on request.
_NO_IMPORT = frozenset({"antigravity", "this", "idlelib", "turtledemo", "tkinter", "turtle"})
# Names unittest's runner looks up in the tests' module and calls itself: the candidate's would run
# at the runner's choosing (before and after every class), so they are never bound.
RUNNER_HOOKS = frozenset({"setUpModule", "tearDownModule", "load_tests"})
# The supervisor's own modules (imported by file name): never what a test's free name means.
_OWN = frozenset(
    {
        "__main__",
        "__lade_task__",
        "supervisor",
        "identity",
        "remote",
        "wire",
        "rebuild",
        "binding",
        "syscalls",
        "worker",
    }
)


def called_names(tests: dict) -> frozenset:
    """Names the test code calls directly (``f(...)``, ``Cls(...)``): the names under test.

    A name of a module that the tests call is a candidate function that happens to share the name
    (``def heapq(...)``); used any other way (``math.isclose``), it means the module.
    """
    sources = list(tests.get("statements", ())) + [tests.get("code", "")]
    names: set = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        names.update(n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
    return frozenset(names)


def _module_name(name: str) -> bool:
    """Whether ``name`` is a top-level module the tests could mean: the standard library's, or one loaded here."""
    return name in sys.stdlib_module_names or (name in sys.modules and name not in _OWN)


def _import(name: str):
    """The supervisor's own import of module ``name``, or None (not importable, or one never imported)."""
    if name.split(".")[0] in _NO_IMPORT:
        return None
    if name.split(".")[0] in _OWN or (name not in sys.modules and name.split(".")[0] not in sys.stdlib_module_names):
        return None  # a package the supervisor has not loaded itself: not imported on the candidate's word
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def bind_candidate(job: dict, namespace: dict, names: dict, modules: dict) -> None:
    """Put the candidate's names (``names``: proxies; ``modules``: name -> module name) into ``namespace``.

    ``override`` names (HumanEval's entry point) replace what the trusted setup defined (the prompt's
    stub). Other candidate names fill only names the trusted code left free, never a builtin, a
    runner hook, or a module's name: a name the candidate bound that is a module's name (whatever it
    bound to it) is the supervisor's import of that module, unless the tests call it (then it is a
    function under test). A module the candidate imported under another name (``import numpy as
    np``) is the supervisor's import of that module, if it is in the standard library or loaded here.

    Raises:
        NameError: when an ``override`` name is missing.
    """
    override = set(job["override_names"])
    called = called_names(job["tests"])
    bind_free = job["bind_candidate_names"]
    free = lambda n: n not in namespace and not hasattr(builtins, n) and n not in RUNNER_HOOKS  # noqa: E731
    for name, value in names.items():
        if type(name) is not str:
            continue
        if name in override:
            namespace[name] = value
        elif bind_free and free(name):
            if _module_name(name) and name not in called:
                module = _import(name)
                if module is not None:
                    namespace[name] = module
            else:
                namespace[name] = value
    for name, module_name in modules.items():
        if not (bind_free and type(name) is str and type(module_name) is str and free(name)):
            continue
        # `import os as sys` still gives the tests the real `sys`.
        module = _import(name if _module_name(name) else module_name)
        if module is not None:
            namespace[name] = module
    missing = sorted(override - set(names))
    if missing:
        raise NameError(f"the candidate does not define {missing}")
