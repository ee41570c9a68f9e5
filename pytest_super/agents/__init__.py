"""Agents by name: the built-in ones, third-party ones from entry points, or `package.module:Class`.

Owns `load_agent`, `AGENT_NAMES` and `needs_llm`. The agent interface itself is in `base.py`; the
lookup by name is `registry.Registry`, shared with the kernel backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_super.registry import Registry

if TYPE_CHECKING:  # the agents' modules are imported when an agent is loaded, not before
    from pytest_super.agents.base import Agent

ENTRY_POINT_GROUP = "pytest_super.agents"

_BUILTINS: dict[str, str] = {
    "react": "pytest_super.agents.react:ReActAgent",
    "react-super": "pytest_super.agents.react:ReActSuperAgent",
    "swe": "pytest_super.agents.swe:SWEAgent",
    "reflexion": "pytest_super.agents.reflexion:ReflexionAgent",
    "gold": "pytest_super.agents.gold:GoldAgent",
    "replay": "pytest_super.agents.replay:ReplayAgent",
    "noagent": "pytest_super.agents.noagent:NoAgent",  # LMR-Bench's no-agent baseline
}

#: the names of the built-in agents
AGENT_NAMES: tuple[str, ...] = tuple(_BUILTINS)

#: built-in agents that never ask a model
_NO_LLM = frozenset({"gold", "replay"})

_REGISTRY = Registry(kind="agent", plural="agents", group=ENTRY_POINT_GROUP, builtins=_BUILTINS)


def known_agent_names() -> list[str]:
    """Built-in names, then the names registered under the `pytest_super.agents` entry points."""
    return _REGISTRY.known_names()


def agent_class(spec: str) -> type:
    """The class an agent spec names (built-in name, entry point name, or `module:Class`)."""
    cls: type = _REGISTRY.find(spec)
    return cls


def load_agent(spec: str) -> Agent:
    """Make the agent `spec` names (no constructor arguments); ValueError if unknown."""
    from pytest_super.agents.base import Agent

    agent: Agent = _REGISTRY.make(spec, Agent, "a `name` attribute and a `run(env)` method")
    return agent


def needs_llm(spec: str) -> bool:
    """Whether the agent asks a model (False for gold and replay, and for classes that say so)."""
    if spec in _NO_LLM:
        return False
    if spec in _BUILTINS:
        return True
    return bool(getattr(agent_class(spec), "needs_llm", True))
