"""SUPER's published reference as the tests read it: the archives of tests/data/super-reference/
unpacked once into a folder named by their content (shared by xdist workers and later sessions).

Nothing here reads outside the repository; the data and how to regenerate it are described in
tests/data/super-reference/README.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "super-reference"
#: the two files of the reference image's definition (super/env/ upstream)
REFERENCE_ENV = DATA / "env"


def _archives(kind: str) -> list[Path]:
    return sorted((DATA / kind).glob("*.tar.xz"))


def _unpacked(kind: str) -> Path:
    """The folder holding one folder per run of `kind` ("runs" or "samples"), unpacked once."""
    archives = _archives(kind)
    if not archives:
        raise FileNotFoundError(f"no archives in {DATA / kind}: the repository's test data is gone")
    digest = hashlib.sha256()
    for archive in archives:
        digest.update(archive.name.encode() + archive.read_bytes())
    target = Path(tempfile.gettempdir()) / f"pytest-super-{kind}-{digest.hexdigest()[:16]}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    for archive in archives:
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(staging, filter="data")
    try:
        os.rename(staging, target)
    except OSError:  # another process unpacked it first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def published_runs() -> Path:
    """The folder of the paper's published runs (one folder per run, one per episode inside)."""
    return _unpacked("runs")


def sample_runs() -> Path:
    """The folder of the sample runs (a few episodes of a run, kept as samples of its layout)."""
    return _unpacked("samples")
