"""Agents by name: the built-in ones, third-party ones from entry points, or `package.module:Class`.

Owns `load_agent`, `AGENT_NAMES` and `needs_llm`. The agent interface itself is in `base.py`.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

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
}

#: the names of the built-in agents
AGENT_NAMES: tuple[str, ...] = tuple(_BUILTINS)

#: built-in agents that never ask a model
_NO_LLM = frozenset({"gold", "replay"})


def _plugin_agents() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_agent_names() -> list[str]:
    """Built-in names, then the names registered under the `pytest_super.agents` entry points."""
    return list(AGENT_NAMES) + sorted(set(_plugin_agents()) - set(AGENT_NAMES))


def _import_class(target: str, spec: str) -> type:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"agent {spec!r}: cannot import module {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"agent {spec!r}: module {module_name!r} has no {attr!r}") from None


def agent_class(spec: str) -> type:
    """The class an agent spec names (built-in name, entry point name, or `module:Class`)."""
    if spec in _BUILTINS:
        return _import_class(_BUILTINS[spec], spec)
    plugins = _plugin_agents()
    if spec in plugins:
        return plugins[spec].load()
    if ":" in spec:
        return _import_class(spec, spec)
    raise ValueError(
        f"unknown agent {spec!r}; known agents: {', '.join(known_agent_names())}, "
        "or give `package.module:Class`"
    )


def load_agent(spec: str) -> Agent:
    """Make the agent `spec` names (no constructor arguments); ValueError if unknown."""
    from pytest_super.agents.base import Agent

    cls = agent_class(spec)
    agent = cls()
    if not isinstance(agent, Agent):
        raise ValueError(
            f"agent {spec!r} ({cls.__module__}.{cls.__qualname__}) is not an agent: it needs a "
            "`name` attribute and a `run(env)` method"
        )
    return agent


def needs_llm(spec: str) -> bool:
    """Whether the agent asks a model (False for gold and replay, and for classes that say so)."""
    if spec in _NO_LLM:
        return False
    if spec in _BUILTINS:
        return True
    return bool(getattr(agent_class(spec), "needs_llm", True))
