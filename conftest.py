"""Wiring for this repository's demo benchmark (not part of the plugin).

The demo tasks clone `https://github.com/super-demo/<name>`; GitHub is not needed: the plain files
under tasks/repos/ are turned into git repositories under .super-cache/mirrors (with the commits the
tasks name), which pyproject's `super_git_mirrors` serves to every kernel.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from pytest_super import thirdparty

ROOT = Path(__file__).resolve().parent
MIRRORS = ROOT / ".super-cache" / "mirrors"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("super_agent", None) and not thirdparty.is_worker(config):
        spec = importlib.util.spec_from_file_location(
            "build_mirrors", ROOT / "tasks" / "repos" / "build_mirrors.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault("build_mirrors", module)  # dataclasses look their module up here
        spec.loader.exec_module(module)
        module.build_mirrors(MIRRORS)
