"""`pytest_super`'s public names: each imported on first use, `import pytest_super` itself cheap."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys

import pytest

import pytest_super

#: names whose module is written by another change and may not exist yet
NOT_YET = {"run_one_task": "pytest_super.execute", "SuperRun": "pytest_super.settings"}


def _importable(name: str) -> bool:
    module = NOT_YET.get(name)
    if module is None:
        return True
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return hasattr(sys.modules[module], name)


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_importing_the_package_imports_none_of_its_modules() -> None:
    out = _python(
        "import sys, pytest_super\n"
        "print(sorted(m for m in sys.modules if m.startswith('pytest_super')))\n"
        "print('docker' in sys.modules, 'jupyter_client' in sys.modules)"
    )
    assert out.splitlines() == ["['pytest_super']", "False False"]


def test_all_lists_the_public_names() -> None:
    assert sorted(pytest_super.__all__) == sorted(pytest_super._EXPORTS)
    for name in (
        "Agent",
        "AgentResult",
        "Environment",
        "Step",
        "Task",
        "TaskResult",
        "ExitStatus",
        "Kernel",
        "KernelBackend",
        "KernelSettings",
        "CellResult",
        "run_one_task",
    ):
        assert name in pytest_super.__all__


@pytest.mark.parametrize("name", pytest_super.__all__)
def test_each_name_is_its_module_s_own_and_imports_alone(name: str) -> None:
    if not _importable(name):
        pytest.skip(f"{NOT_YET[name]} does not define {name} yet")
    module = importlib.import_module(pytest_super._EXPORTS[name])
    assert getattr(pytest_super, name) is getattr(module, name)
    # in a fresh interpreter, first thing: no import cycle behind the name
    assert _python(f"from pytest_super import {name}; print({name}.__name__)") == f"{name}\n"


def test_dir_shows_the_public_names_and_the_version() -> None:
    listed = dir(pytest_super)
    assert set(pytest_super.__all__) <= set(listed)
    assert "__version__" in listed
    assert listed == sorted(listed)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'pytest_super' has no attribute 'Nope'"):
        pytest_super.Nope  # noqa: B018
    assert not hasattr(pytest_super, "Nope")


def test_version_comes_from_the_installed_metadata() -> None:
    assert pytest_super.__version__ == importlib.metadata.version("pytest-super")


def test_version_without_metadata_is_unknown(monkeypatch) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert pytest_super._version() == pytest_super.UNKNOWN_VERSION
