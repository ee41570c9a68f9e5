"""A third-party provider (an executor or a kernel backend) installed for the subprocesses a test
runs: its module in a folder, registered as an entry point by a distribution's metadata there, the
folder on their PYTHONPATH (tests/test_settings_providers.py, tests/test_options.py); and a script's
start that counts the scans of the installed packages' entry points."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: the start of a script that counts, in `scans`, the calls of `importlib.metadata.entry_points`
#: pytest-super makes (each reads every installed distribution's metadata); it prints `scans`
#: (tests/test_settings_providers.py, benchmarks/bench_startup.py)
COUNT_SCANS = """\
import importlib.metadata as metadata
import sys

scans = []
read = metadata.entry_points


def counted(**params):
    if sys._getframe(1).f_globals.get("__name__", "").startswith("pytest_super"):
        scans.append(params)
    return read(**params)


metadata.entry_points = counted
"""


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
