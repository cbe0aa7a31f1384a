"""The package list pyproject.toml cannot state: every package under ``src/`` plus ``lade_bench.conf`` from ``conf/``.

The Hydra configs are edited in the top-level ``conf/`` and ship as the package ``lade_bench.conf``
(``package_dir`` maps it there), so an installed, non-editable lade_bench composes the same configs as
a checkout; ``tests/test_packaging.py`` builds the wheel and composes ``run`` and ``tune`` from it.
"""

from setuptools import find_namespace_packages, setup

# Namespace discovery, as pyproject's find did: hydra_plugins/ has no __init__.py (Hydra's convention).
SRC_PACKAGES = find_namespace_packages("src", include=["lade_bench*", "hydra_plugins*"])
CONF_PACKAGES = ["lade_bench.conf", *(f"lade_bench.conf.{group}" for group in find_namespace_packages("conf"))]

setup(packages=[*SRC_PACKAGES, *CONF_PACKAGES], package_dir={"": "src", "lade_bench.conf": "conf"})
