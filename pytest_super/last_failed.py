"""`--lf` and `--ff` scoped to the run's agent and model (issue 44: a `--lf` after a gold run reran a
react run's failures, silently).

pytest keeps one record of last failures per checkout (`.pytest_cache`, `cache/lastfailed`), shared
by every run whatever its agent. We keep one per agent and model (`pytest-super/lastfailed` in the
same cache: agent and model to node ids) and hand pytest's `LFPlugin` the run's own at configure
time; pytest then selects, updates and writes it as usual, and at the session's end the controller
files it under the run's agent and model. The report header says whose failures `--lf`/`--ff` use.

Reaches `LFPlugin`'s `lastfailed` and `_last_failed_paths` (pytest 9.1; the latter computed in its
constructor, before this module's configure).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_super import thirdparty

#: the cache key of our record: {"<agent>\t<model>": {node id: true}}
CACHE_KEY = "pytest-super/lastfailed"


def _lfplugin(config: pytest.Config) -> Any:  # Any: LFPlugin, private
    """pytest's LFPlugin, or None (`-p no:cacheprovider`)."""
    if getattr(config, "cache", None) is None:
        return None
    return config.pluginmanager.get_plugin("lfplugin")


def _whose(agent: str, model: str | None) -> str:
    return f"{agent}\t{model or ''}"


def _record(config: pytest.Config) -> dict[str, object]:
    assert config.cache is not None
    record = config.cache.get(CACHE_KEY, {})
    return record if isinstance(record, dict) else {}


def scope(config: pytest.Config, agent: str, model: str | None) -> None:
    """At configure: pytest's record of last failures becomes this agent's and model's."""
    plugin = _lfplugin(config)
    if plugin is None:
        return
    mine = _record(config).get(_whose(agent, model))
    plugin.lastfailed = {str(k): True for k in mine} if isinstance(mine, dict) else {}
    if hasattr(plugin, "_last_failed_paths"):  # --lf: the folders collected, from the record
        plugin._last_failed_paths = plugin.get_last_failed_paths()


def save(config: pytest.Config, agent: str, model: str | None) -> None:
    """At the session's end, on the controller: this run's record, as pytest left it, filed under
    its agent and model."""
    plugin = _lfplugin(config)
    if plugin is None or thirdparty.is_worker(config) or config.getoption("cacheshow"):
        return
    record = _record(config)
    record[_whose(agent, model)] = dict(plugin.lastfailed)
    assert config.cache is not None
    config.cache.set(CACHE_KEY, record)


def header(config: pytest.Config, agent: str, model: str | None) -> list[str]:
    """The header line of a `--lf` or `--ff` run: whose failures it reruns."""
    plugin = _lfplugin(config)
    if plugin is None or not plugin.active:
        return []
    flag = "--lf" if config.getoption("lf") else "--ff"
    return [
        f"pytest-super: {flag} reruns the last failures of agent {agent}, model "
        f"{model or '(none)'}: {len(plugin.lastfailed)} recorded (other agents' and models' "
        "failures are kept apart)"
    ]
