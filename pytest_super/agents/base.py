"""The agent interface: anything with `name` and `run(env) -> AgentResult`.

The environment an agent acts in, its result and its limits are in `environment.py`, the exit
statuses and the `EpisodeEnd` exceptions that end an episode early in `errors.py`, the names of
the actions a step records (`Action`) in `trajectory.py`; they are named here too, where agents
have always imported them from.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pytest_super.environment import AgentResult, Environment, EpisodeLimits
from pytest_super.errors import (
    BudgetExceeded,
    ComputeLimitReached,
    DiskLimitExceeded,
    EpisodeEnd,
    ExitStatus,
    FormatErrorsExceeded,
    StepLimitReached,
)
from pytest_super.trajectory import Action

__all__ = [
    "Action",
    "Agent",
    "AgentResult",
    "BudgetExceeded",
    "ComputeLimitReached",
    "DiskLimitExceeded",
    "Environment",
    "EpisodeEnd",
    "EpisodeLimits",
    "ExitStatus",
    "FormatErrorsExceeded",
    "StepLimitReached",
]


@runtime_checkable
class Agent(Protocol):
    """An agent. Third-party agents implement this (see README, "Writing an agent")."""

    name: str

    def run(self, env: Environment) -> AgentResult: ...
