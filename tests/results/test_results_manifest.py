import json
import re
from pathlib import Path

import pytest

import lade_bench
from lade_bench.results import build_manifest, git_state, package_versions
from lade_bench.results.manifest import TRACKED_PACKAGES

FIELDS = {
    "git_sha",
    "git_dirty",
    "packages",
    "python",
    "platform",
    "device",
    "seeds",
    "created_utc",
    "row_schema_version",
}


def test_manifest_fields():
    manifest = build_manifest({"global": 0, "sampling": 7}, "cpu", extra={"command": "lade_bench.run +sweep=x"})
    assert FIELDS <= set(manifest)
    assert manifest["device"] == "cpu"
    assert manifest["seeds"] == {"global": 0, "sampling": 7}
    assert manifest["command"] == "lade_bench.run +sweep=x"
    assert (
        set(manifest["packages"])
        == set(TRACKED_PACKAGES)
        == {"torch", "transformers", "lade_bench", "datasets", "hydra-core", "wandb", "pandas", "pyarrow"}
    )
    assert manifest["packages"]["pyarrow"] and manifest["packages"]["pandas"]
    assert manifest["packages"]["lade_bench"] == lade_bench.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", manifest["python"])
    assert manifest["created_utc"].endswith("+00:00")
    json.dumps(manifest)  # must be writable as manifest.json as is


def test_git_state_of_the_package_checkout():
    sha, dirty = git_state(Path(lade_bench.__file__).parent)
    if sha is None:
        pytest.skip("package is not installed from a git checkout")
    assert re.fullmatch(r"[0-9a-f]{40}", sha) and isinstance(dirty, bool)
    assert build_manifest({}, "cpu")["git_sha"] == sha


def test_git_state_outside_a_checkout(tmp_path):
    assert git_state(tmp_path) == (None, None)


def test_missing_package_is_none():
    assert package_versions(("pyarrow", "no-such-distribution-xyz")) == {
        "pyarrow": package_versions(("pyarrow",))["pyarrow"],
        "no-such-distribution-xyz": None,
    }


def test_extra_cannot_overwrite_standard_fields():
    with pytest.raises(ValueError, match="device"):
        build_manifest({}, "cpu", extra={"device": "cuda"})
