"""The settings a provider declares for itself, next to the table's: each executor's (`settings`
of its class, read without importing a cluster's client library), each kernel backend's
(`kernels.declared_settings`, read without importing an engine's client library), and all the
settings there are.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pytest_super.settings.readers import SettingError
from pytest_super.settings.table import SETTINGS, Setting


@functools.cache
def executors_settings() -> dict[str, tuple[Setting, ...]]:
    """The settings each known executor declares (its class's `settings`), by executor: read once
    per process, without importing any cluster's client library. A name that is already a
    setting (the table's or another executor's) is refused: one option would mean two things."""
    from pytest_super import executors

    taken = {s.name: "pytest-super" for s in SETTINGS}
    declared: dict[str, tuple[Setting, ...]] = {}
    for executor, table in executors.declared_settings().items():
        for s in table:
            if not isinstance(s, Setting):
                raise SettingError(
                    f"executor {executor!r}: its `settings` hold {s!r}, not a "
                    "pytest_super.settings.Setting"
                )
            if s.name in taken:
                raise SettingError(
                    f"executor {executor!r} declares the setting {s.name!r}, which is "
                    f"{taken[s.name]}'s already: rename it (e.g. {executor}_{s.name})"
                )
            taken[s.name] = f"executor {executor!r}"
        declared[executor] = tuple(table)
    return declared


@functools.cache
def backends_settings() -> dict[str, tuple[Setting, ...]]:
    """The settings each known kernel backend declares (`kernels.base.BackendSetting`), as
    settings of the table's kind, by backend: read once per process. A name that is already a
    setting (the table's, an executor's or another backend's) is refused."""
    from pytest_super import kernels

    taken = {s.name: "pytest-super" for s in SETTINGS}
    taken.update(
        {s.name: f"executor {e!r}" for e, table in executors_settings().items() for s in table}
    )
    declared: dict[str, tuple[Setting, ...]] = {}
    try:
        backends = kernels.declared_settings()
    except ValueError as exc:
        raise SettingError(str(exc)) from None
    for backend, table in backends.items():
        for s in table:
            if s.name in taken:
                raise SettingError(
                    f"kernel backend {backend!r} declares the setting {s.name!r}, which is "
                    f"{taken[s.name]}'s already: rename it (e.g. {backend}_{s.name})"
                )
            taken[s.name] = f"kernel backend {backend!r}"
        declared[backend] = tuple(
            Setting(s.name, s.read, s.default, s.help, metavar=s.metavar) for s in table
        )
    return declared


def all_settings() -> tuple[Setting, ...]:
    """The table's settings, then every kernel backend's, then every executor's: the
    `--super-*` options, ini keys and `SuperRun.resolve` keywords there are."""
    return (
        SETTINGS
        + tuple(s for table in backends_settings().values() for s in table)
        + tuple(s for table in executors_settings().values() for s in table)
    )


def backend_options(backend: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The values of the settings `backend` declares that differ from their defaults, by name
    (`KernelSettings.options`: the backend applies its own defaults, so that a directly built
    `KernelSettings()` means what a run that set nothing means)."""
    return {
        s.name: values[s.name]
        for s in backends_settings().get(backend, ())
        if values[s.name] != s.default
    }


def setting_named(name: str) -> Setting:
    """The setting `name`, the table's or an executor's; KeyError if there is none."""
    found = {s.name: s for s in all_settings()}
    return found[name]


def cluster_addresses() -> dict[str, Setting]:
    """Each executor's setting that names its cluster (`cluster_address`), by executor."""
    return {
        executor: s
        for executor, table in executors_settings().items()
        for s in table
        if s.cluster_address
    }
