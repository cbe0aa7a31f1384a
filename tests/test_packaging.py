"""The configs live in the top-level ``conf/`` and a non-editable install still composes them.

``setup.py`` maps the package ``lade_bench.conf`` to ``conf/``: the editable install of the checkout
imports it from there, and the wheel carries it inside ``lade_bench/``. This test builds the wheel,
unpacks it away from the checkout and composes ``run`` and ``tune`` from it, comparing values with
the checkout's ``conf/`` files.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

import lade_bench.conf
from lade_bench.conf import PACKAGE_CONF_DIR

REPO = Path(__file__).resolve().parents[1]


def test_the_checkout_composes_from_the_top_level_conf_folder():
    assert PACKAGE_CONF_DIR == REPO / "conf"
    assert Path(lade_bench.conf.__file__).parent == REPO / "conf"
    assert not (REPO / "src" / "lade_bench" / "conf").exists()


def _composed(module: str, args: list[str], site: Path, home: Path) -> dict:
    elsewhere = home / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    # Only the unpacked wheel provides lade_bench: -P keeps the working folder off the path, and
    # PYTHONPATH puts the wheel before the checkout's editable install.
    env = {"PYTHONPATH": str(site), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-P", "-m", module, "--cfg", "job", *args],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def _conf(name: str) -> dict:
    return yaml.safe_load((REPO / "conf" / name).read_text())


@pytest.mark.slow
def test_an_installed_wheel_composes_run_and_tune_from_its_conf_away_from_the_checkout(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("lade_bench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).relative_to("lade_bench/conf").as_posix() for n in names if n.startswith("lade_bench/conf/")}
    expected = {p.relative_to(REPO / "conf").as_posix() for p in (REPO / "conf").rglob("*.yaml")}
    assert expected <= shipped and "__init__.py" in shipped
    assert "hydra_plugins/lade_bench_launchers/__init__.py" in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)

    run = _composed("lade_bench.run", ["lookahead=paper_7b"], site, tmp_path)
    assert run["max_new_tokens"] == _conf("settings.yaml")["max_new_tokens"]
    assert run["lookahead"]["window"] == _conf("lookahead/paper_7b.yaml")["window"]
    swept = _composed("lade_bench.run", ["+sweep=main"], site, tmp_path)
    assert swept["max_new_tokens"] == _conf("sweep/main.yaml")["max_new_tokens"] != run["max_new_tokens"]
    tune = _composed("lade_bench.tune", [], site, tmp_path)
    assert tune["tune"]["trials"] == _conf("tune.yaml")["tune"]["trials"]

    probe = "import lade_bench.conf as c; print(c.PACKAGE_CONF_DIR)"
    where = subprocess.run(
        [sys.executable, "-P", "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(site)}, capture_output=True, text=True
    )
    assert where.stdout.strip() == str(site / "lade_bench" / "conf"), where
