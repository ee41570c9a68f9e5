"""pytest-super: the SUPER benchmark as pytest items, agents acting in Jupyter kernels.

The names people writing agents and kernel backends use are importable from here:

    from pytest_super import Agent, AgentResult, Environment, Step

Each is imported on first use (PEP 562), so `import pytest_super`, which pytest does to load the
plugin, imports none of the package's modules, and no module of the package imports this one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the real types for type checkers; at run time `__getattr__` imports them
    from pytest_super.agents.base import Agent
    from pytest_super.environment import AgentResult, Environment
    from pytest_super.errors import ExitStatus
    from pytest_super.execute import outcome_of, run_one_task
    from pytest_super.kernels.base import CellResult, Kernel, KernelBackend, KernelSettings
    from pytest_super.outcome import TaskError, TaskOutcome
    from pytest_super.run_record import run_tasks
    from pytest_super.runner import TaskResult
    from pytest_super.settings import SuperRun
    from pytest_super.tasks import Task, load_tasks
    from pytest_super.trajectory import Step

#: each public name -> the module it is imported from
_EXPORTS = {
    "Agent": "pytest_super.agents.base",
    "AgentResult": "pytest_super.environment",
    "CellResult": "pytest_super.kernels.base",
    "Environment": "pytest_super.environment",
    "ExitStatus": "pytest_super.errors",
    "Kernel": "pytest_super.kernels.base",
    "KernelBackend": "pytest_super.kernels.base",
    "KernelSettings": "pytest_super.kernels.base",
    "Step": "pytest_super.trajectory",
    "SuperRun": "pytest_super.settings",
    "Task": "pytest_super.tasks",
    "TaskError": "pytest_super.outcome",
    "TaskOutcome": "pytest_super.outcome",
    "TaskResult": "pytest_super.runner",
    "load_tasks": "pytest_super.tasks",
    "outcome_of": "pytest_super.execute",
    "run_one_task": "pytest_super.execute",
    "run_tasks": "pytest_super.run_record",
}

__all__ = [
    "Agent",
    "AgentResult",
    "CellResult",
    "Environment",
    "ExitStatus",
    "Kernel",
    "KernelBackend",
    "KernelSettings",
    "Step",
    "SuperRun",
    "Task",
    "TaskError",
    "TaskOutcome",
    "TaskResult",
    "load_tasks",
    "outcome_of",
    "run_one_task",
    "run_tasks",
]

#: the version when the package's metadata cannot be read (a source tree never installed)
UNKNOWN_VERSION = "0+unknown"


def __getattr__(name: str) -> object:
    if name == "__version__":
        value: object = _version()
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # imported once: later reads do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-super")
    except PackageNotFoundError:
        return UNKNOWN_VERSION
