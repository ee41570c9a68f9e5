"""A third-party provider (an executor or a kernel backend) installed for the subprocesses a test
runs: its module in a folder, registered as an entry point by a distribution's metadata there, the
folder on their PYTHONPATH (tests/test_settings_providers.py, tests/test_options.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def install_toy_provider(
    site: Path, monkeypatch: pytest.MonkeyPatch, *, group: str, target: str, source: str
) -> None:
    """The module of `target` ("module:Class", registered as "toy" under the entry-point `group`)
    written from `source` into `site`, with the metadata of a distribution of that module's name
    registering it, and `site` first on PYTHONPATH."""
    module = target.partition(":")[0]
    site.mkdir(exist_ok=True)
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\ntoy = {target}\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
