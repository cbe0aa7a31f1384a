"""Code that runs inside the sandbox: the trusted supervisor and the worker that runs generated code.

These modules are started as scripts inside bubblewrap (``python -I``), so they use the standard
library only and import each other by file, never through ``lade_bench``. The host side is
:mod:`lade_bench.sandbox`.
"""
