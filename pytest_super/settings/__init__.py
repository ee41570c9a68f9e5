"""The run's settings: one table (`SETTINGS`), one resolution, one plain record (`SuperRun`).

Each setting is declared once in `SETTINGS`: its option `--super-<name>`, its ini key
`super_<name>`, the environment variables that hold it where one is customary, its default and how
its text is read. A value comes from the option (or a keyword of `SuperRun.resolve`), else the
environment, else the ini file, else the default; a bad one is a `SettingError` naming where it
came from (`--super-mem`, `environment variable RAY_ADDRESS`, `ini super_mem (pytest.ini)`).
`run.sources` says where each value came from.

Under pytest, options.py hands `resolve_run` what pytest parsed (the same code path); a script
resolves the settings of a folder as a pytest run there would:

    run = SuperRun.resolve(rootdir=Path("bench"), agent="gold", mem="3g")

and `SuperRun(...)` built directly holds the same defaults as a pytest run, and is refused what
the options refuse. Nothing here imports pytest: the ini file is found and read by `find_ini`
(ini.py), which follows pytest's own search.

The modules, each one job:

- readers.py: how a setting's text is read (sizes, numbers in bounds, choices, true/false,
  prices, names) and `SettingError`;
- table.py: `Setting` and `SETTINGS`, the on/off settings among them (`Setting.boolean`);
- providers.py: the settings a provider (an executor, a kernel backend) declares for itself,
  and `all_settings()`;
- ini.py: the ini file, found and read as pytest does (`find_ini`, `rootdir_without_ini`);
- resolve.py: `Inputs` and the resolution (`resolve_one`, `resolve_values`, a subcommand's
  option by `resolve_setting`);
- endpoint.py: the model endpoint's settings and the API key;
- superrun.py: `SuperRun`, `new_run_id`, `resolve_run`.

Every name the rest of the package imports from `pytest_super.settings` is here.

**Providers own their settings.** An executor or a kernel backend declares its own settings as a
tuple of `Setting` in the `settings` attribute of its class (the Ray executor's:
executors/ray/settings.py). They are options, ini keys and `SuperRun.resolve` keywords like the
table's, resolved with the same precedence and messages, and a run holds their values by kind:
`SuperRun.executor_settings` and `SuperRun.backend_settings` (name -> value, every provider's of
that kind). `provider_settings(kind)`, `kind` "executor" or "backend", gives what each known
provider of that kind declares, by provider name, found without importing a heavy library: an
executor's class is read (its module imports no cluster library); a built-in backend's module is
never imported to find them, so a built-in backend that declares settings is listed in
`providers.BUILTIN_BACKEND_SETTINGS` as "module:NAME" of the tuple its class's `settings` holds
(e.g. "docker": "pytest_super.kernels.docker.settings:SETTINGS"), while a third-party backend's
class (an entry point of `pytest_super.backends`) is imported and read. A name that is already a
setting, the table's or another provider's, is a `SettingError` naming both.
"""

from __future__ import annotations

from pytest_super.settings.endpoint import API_KEY_VARIABLES
from pytest_super.settings.ini import (
    IniFile,
    find_ini,
    ini_lines,
    ini_paths,
    rootdir_without_ini,
)
from pytest_super.settings.providers import (
    ProviderKind,
    all_settings,
    cluster_addresses,
    engine_address_of,
    engine_addresses,
    executors_settings,
    provider_settings,
    setting_named,
)
from pytest_super.settings.readers import (
    CPU_BOUNDS,
    DISK_BOUNDS,
    MEMORY_BOUNDS,
    PRICE_BOUNDS,
    REPEAT_BOUNDS,
    THRESHOLD_BOUNDS,
    TOLERANCE_BOUNDS,
    SettingError,
    memory_size,
    number_reader,
)
from pytest_super.settings.resolve import (
    TRUSTED_AGENTS,
    Inputs,
    add_shared_argument,
    resolve_one,
    resolve_setting,
    resolve_setting_source,
    resolve_values,
)
from pytest_super.settings.superrun import SuperRun, new_run_id, resolve_run
from pytest_super.settings.table import (
    DEFAULT_BASE_URL,
    DEFAULT_DISK,
    SETTINGS,
    Setting,
    default_of,
)

__all__ = [
    "API_KEY_VARIABLES",
    "CPU_BOUNDS",
    "DEFAULT_BASE_URL",
    "DEFAULT_DISK",
    "DISK_BOUNDS",
    "MEMORY_BOUNDS",
    "PRICE_BOUNDS",
    "REPEAT_BOUNDS",
    "SETTINGS",
    "THRESHOLD_BOUNDS",
    "TOLERANCE_BOUNDS",
    "TRUSTED_AGENTS",
    "IniFile",
    "Inputs",
    "ProviderKind",
    "Setting",
    "SettingError",
    "SuperRun",
    "add_shared_argument",
    "all_settings",
    "cluster_addresses",
    "default_of",
    "engine_address_of",
    "engine_addresses",
    "executors_settings",
    "find_ini",
    "ini_lines",
    "ini_paths",
    "memory_size",
    "new_run_id",
    "number_reader",
    "provider_settings",
    "resolve_one",
    "resolve_run",
    "resolve_setting",
    "resolve_setting_source",
    "resolve_values",
    "rootdir_without_ini",
    "setting_named",
]
