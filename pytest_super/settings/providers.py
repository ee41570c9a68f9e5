"""The settings a provider declares for itself, next to the table's.

A provider is an executor (`--super-executor`, executors/) or a kernel backend
(`--super-backend`, kernels/). It declares its own settings as a tuple of `Setting` in the
`settings` attribute of its class (a kernel backend, below this package, as a tuple of
`kernels.base.BackendSetting`, made a `Setting` here: `as_settings`) (e.g. the Ray executor's, executors/ray/settings.py): each is a
`--super-<name>` option, an ini key `super_<name>`, a `SuperRun.resolve` keyword, resolved as the
table's are (option > environment > ini > default, the same messages), and a run holds their
values by provider kind: `SuperRun.executor_settings`, `SuperRun.backend_settings`.

They are found without importing a heavy library (settings are read at every pytest start):

- executors: `executors.declared_settings()`, which reads each known executor's class (a built-in
  executor's module imports no cluster library);
- kernel backends: a built-in backend's module is never imported here (the Docker SDK,
  jupyter_client): the built-in backends that declare settings are listed in
  `BUILTIN_BACKEND_SETTINGS` ("module:NAME" of their tuple, the same tuple as their class's
  `settings`); a third-party backend (an entry point of `pytest_super.backends`) is imported and
  its class's `settings` read.

A name that is already a setting (the table's or another provider's) is refused: one option would
mean two things.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from importlib import import_module
from typing import Literal, cast

from pytest_super.settings.readers import SettingError
from pytest_super.settings.table import SETTINGS, Setting

ProviderKind = Literal["executor", "backend"]
#: each kind as its messages name it, in the order its settings follow the table's
PROVIDER_KINDS: dict[ProviderKind, str] = {"executor": "executor", "backend": "kernel backend"}

#: the built-in kernel backends that declare settings: backend name -> "module:NAME" of the tuple
#: its class's `settings` holds, read without importing the backend's own module
BUILTIN_BACKEND_SETTINGS: dict[str, str] = {
    "docker": "pytest_super.kernels.docker.settings:SETTINGS"
}


def provider_settings(kind: ProviderKind) -> dict[str, tuple[Setting, ...]]:
    """The settings each known provider of `kind` declares, by provider (those declaring none left
    out): read once per process, checked against the table's and the other providers' names."""
    return _declared_settings()[kind]


def executors_settings() -> dict[str, tuple[Setting, ...]]:
    """The settings each known executor declares, by executor (`provider_settings("executor")`)."""
    return provider_settings("executor")


@functools.cache
def _declared_settings() -> dict[ProviderKind, dict[str, tuple[Setting, ...]]]:
    taken = {s.name: "pytest-super" for s in SETTINGS}
    declared: dict[ProviderKind, dict[str, tuple[Setting, ...]]] = {}
    for kind, label in PROVIDER_KINDS.items():
        declared[kind] = {}
        for provider, table in _declared_by(kind).items():
            who = f"{label} {provider!r}"
            for s in table:
                if not isinstance(s, Setting):
                    raise SettingError(
                        f"{who}: its `settings` hold {s!r}, not a pytest_super.settings.Setting"
                    )
                if s.name in taken:
                    raise SettingError(
                        f"{who} declares the setting {s.name!r}, which is {taken[s.name]}'s "
                        f"already: rename it (e.g. {provider}_{s.name})"
                    )
                taken[s.name] = who
            declared[kind][provider] = cast("tuple[Setting, ...]", tuple(table))
    return declared


def _declared_by(kind: ProviderKind) -> dict[str, tuple[object, ...]]:
    """What each known provider of `kind` declares, unchecked."""
    if kind == "executor":
        from pytest_super import executors

        return executors.declared_settings()
    return _backends_declared()


def _backends_declared() -> dict[str, tuple[object, ...]]:
    """The built-in backends' settings from `BUILTIN_BACKEND_SETTINGS`, then each third-party
    backend's class's `settings`. One that does not load declares nothing here: choosing it says
    why (`--super-backend`)."""
    from pytest_super import kernels

    declared: dict[str, tuple[object, ...]] = {}
    for name in kernels.known_backend_names():
        if name in kernels.BACKENDS:
            where = BUILTIN_BACKEND_SETTINGS.get(name)
            if where is not None:
                module, _, attribute = where.partition(":")
                declared[name] = as_settings(getattr(import_module(module), attribute))
            continue
        try:
            cls = kernels.kernel_backend_class(name)
        except ValueError:
            continue
        table = as_settings(getattr(cls, "settings", ()) or ())
        if table:
            declared[name] = table
    return declared


def as_settings(declared: Iterable[object]) -> tuple[object, ...]:
    """A backend's `settings` as the table's kind: a `kernels.base.BackendSetting` (the kernels'
    own declaration, which cannot import this package) becomes the `Setting` it describes;
    anything else is left for the check to judge."""
    from pytest_super.kernels.base import BackendSetting

    return tuple(
        Setting(
            s.name,
            s.read,
            s.default,
            s.help,
            metavar=s.metavar,
            engine_address=s.engine_address,
            untrusted=s.untrusted,
        )
        if isinstance(s, BackendSetting)
        else s
        for s in declared
    )


def all_settings() -> tuple[Setting, ...]:
    """The table's settings, then every executor's, then every kernel backend's: the `--super-*`
    options, ini keys and `SuperRun.resolve` keywords there are."""
    return SETTINGS + tuple(
        s for kind in PROVIDER_KINDS for table in provider_settings(kind).values() for s in table
    )


def setting_named(name: str) -> Setting:
    """The setting `name`, the table's or a provider's; KeyError if there is none."""
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


def provider_defaults(kind: ProviderKind) -> dict[str, object]:
    """Every setting the providers of `kind` declare, as a pytest run given none holds it."""
    return {
        s.name: s.read(s.default) if isinstance(s.default, str) else s.default
        for table in provider_settings(kind).values()
        for s in table
    }


def engine_addresses() -> dict[str, Setting]:
    """Each kernel backend's settings that name its engine (`engine_address`), by name."""
    return {
        s.name: s
        for table in provider_settings("backend").values()
        for s in table
        if s.engine_address
    }


def engine_address_of(backend: str, options: Mapping[str, object]) -> str | None:
    """The address of `backend`'s engine in its options (`KernelSettings.options`), if it has a
    setting naming one and it is set."""
    for s in provider_settings("backend").get(backend, ()):
        if s.engine_address and options.get(s.name):
            return str(options[s.name])
    return None


def provider_values(kind: ProviderKind, values: Mapping[str, object]) -> dict[str, object]:
    """The resolved `values` of the settings the providers of `kind` declare, by name."""
    return {s.name: values[s.name] for table in provider_settings(kind).values() for s in table}


def backend_options(backend: str, values: Mapping[str, object]) -> dict[str, object]:
    """The values of the settings `backend` declares that differ from their defaults, by name
    (`KernelSettings.options`: the backend applies its own defaults, so that a directly built
    `KernelSettings()` means what a run that set nothing means)."""
    return {
        s.name: values[s.name]
        for s in provider_settings("backend").get(backend, ())
        if values[s.name] != s.default
    }
