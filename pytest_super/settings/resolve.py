"""Resolution: one code path for pytest and scripts. A setting's value is the one given (a pytest
option, a keyword of `SuperRun.resolve`), else its environment variables', else the ini file's,
else its default (`resolve_one`); a text that does not read is a `SettingError` naming its
source. `Inputs` is what a run is resolved from: options.py makes it from pytest's config,
`script_inputs` from a folder and keywords, `resolve_setting` from a subcommand's option.
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pytest_super.kernels.base import KernelSettings
from pytest_super.settings.ini import find_ini, ini_lines, ini_paths, rootdir_without_ini
from pytest_super.settings.providers import (
    all_settings,
    backend_options,
    provider_settings,
    setting_named,
)
from pytest_super.settings.readers import SettingError, shown
from pytest_super.settings.table import SettingValues
from pytest_super.tasks import SETS

#: agents whose code is the task's own (reviewed) solution: they may share the pip cache
TRUSTED_AGENTS = frozenset({"gold"})


@dataclass(frozen=True)
class Inputs:
    """What a run's settings are resolved from. `given(name)` is the value given for a setting
    (a pytest option, a keyword of `SuperRun.resolve`; None: not given) and `given_source(name)`
    says so ("--super-mem"); `ini(key)` the ini file's value (None: absent), `ini_label` names it;
    relative paths are taken from `rootpath` (report folder, mirrors) and `invocation_dir`
    (--super-durations)."""

    given: Callable[[str], object]
    given_source: Callable[[str], str]
    ini: Callable[[str], object]
    ini_label: str
    rootpath: Path
    invocation_dir: Path
    task_roots: tuple[Path, ...]
    worker: str = "main"
    capture_no: bool = False
    warn: Callable[[str], None] = lambda message: warnings.warn(message, stacklevel=3)


def resolve_one(
    inputs: Inputs,
    name: str,
    read: Callable[[str], object],
    default: object,
    *,
    ini: bool,
    env: tuple[str, ...] = (),
) -> tuple[object, str]:
    """(value, where it came from): given, else the environment, else the ini, else the default.
    A value that does not read is a `SettingError` naming its source."""
    candidates: list[tuple[object, str]] = [(inputs.given(name), inputs.given_source(name))]
    candidates += [(os.environ.get(var) or None, f"environment variable {var}") for var in env]
    if ini:
        candidates.append(
            (inputs.ini("super_" + name) or None, f"ini super_{name}{inputs.ini_label}")
        )
    for raw, source in candidates:
        if raw is None:
            continue
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            raw = str(raw)  # a number given in Python reads as its text would
        if not isinstance(raw, str):  # an on/off option, or a value given in Python already read
            return raw, source
        try:
            return read(raw), source
        except ValueError as exc:
            raise SettingError(f"{source} {shown(raw)}: {exc}") from None
    return (read(default) if isinstance(default, str) else default), "default"


def resolve_values(inputs: Inputs) -> tuple[SettingValues, dict[str, str]]:
    """Every setting (the table's and the providers'), with its source."""
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for s in sorted(all_settings(), key=lambda s: s.boolean):  # the on/off ones last, as ever
        values[s.name], sources[s.name] = resolve_one(
            inputs, s.name, s.read, s.default, ini=s.ini, env=s.env
        )
    values["agent"] = inputs.given("agent")
    sources["agent"] = inputs.given_source("agent") if values["agent"] else "default"
    return cast(SettingValues, values), sources


def run_sets(given: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """--super-set: the sets named (comma-separated or repeated); None: every set."""
    if not given:
        return None
    texts = [given] if isinstance(given, str) else list(given)
    names = [n.strip() for text in texts for n in text.split(",") if n.strip()]
    for n in names:
        if n not in SETS:
            raise SettingError(f"--super-set: unknown set {n!r}; use one of {', '.join(SETS)}")
    return tuple(names)


def _git_mirrors(inputs: Inputs, sources: dict[str, str]) -> dict[str, str]:
    """PREFIX=DIR mirrors of the ini's super_git_mirrors, then those given; DIR relative to the
    root folder."""
    in_ini = ini_lines(cast("str | list[str]", inputs.ini("super_git_mirrors") or []))
    given = cast("str | list[str]", inputs.given("git_mirror") or [])
    given = [given] if isinstance(given, str) else list(given)
    mirrors: dict[str, str] = {}
    for spec, source in [(s, "ini super_git_mirrors" + inputs.ini_label) for s in in_ini] + [
        (s, inputs.given_source("git_mirror")) for s in given
    ]:
        prefix, sep, directory = spec.rpartition("=")
        if not sep or not prefix:
            raise SettingError(f"--super-git-mirror {spec!r}: expected PREFIX=DIR")
        path = Path(directory)
        mirrors[prefix] = str(path if path.is_absolute() else (inputs.rootpath / path).resolve())
        sources["git_mirror " + prefix] = source
    return mirrors


def executor_alias(values: SettingValues, sources: dict[str, str]) -> None:
    """`--super-backend=<alias>` (deprecated): the executor it names, tasks with the kernel backend
    the alias stands for there; warned once per process."""
    from pytest_super import executors

    alias = executors.BACKEND_ALIASES.get(values["backend"])
    if alias is None:
        return
    message = executors.deprecated_backend_message(values["backend"])
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, FutureWarning, stacklevel=2)
    values["executor"], values["backend"] = alias
    sources["executor"] = sources.get("backend", "default")


#: deprecation messages this process has shown
_WARNED: set[str] = set()


def kernel_settings(
    values: SettingValues, inputs: Inputs, sources: dict[str, str], run_id: str
) -> KernelSettings:
    return KernelSettings(
        backend=values["backend"],
        image=values["image"],
        mem=values["mem"],
        cpus=values["cpus"],
        network=values["network"],
        git_mirrors=_git_mirrors(inputs, sources),
        disk_bytes=values["disk"],
        run_id=run_id,
        worker=inputs.worker,
        options=_trusted_options(inputs, values, sources),
    )


def _trusted_options(
    inputs: Inputs, values: SettingValues, sources: dict[str, str]
) -> dict[str, object]:
    """The backend's options (`backend_options`), without those it shares only between trusted
    runs (`Setting.untrusted`: the pip cache) when the agent is not trusted: one task must not
    poison another. Dropping one is said when the run asked for it (the command line, the
    environment), not when it is the ini file's setting for every run of the project (issue 44:
    every non-gold run of this repository warned about its own pyproject.toml)."""
    options = backend_options(values["backend"], values)
    agent = values["agent"]
    if not agent or agent in TRUSTED_AGENTS:
        return options
    for s in provider_settings("backend").get(values["backend"], ()):
        if not (s.untrusted and options.get(s.name)):
            continue
        value = options.pop(s.name)
        if inputs.worker == "main" and not sources.get(s.name, "").startswith("ini "):
            inputs.warn(s.untrusted.format(value=value, agent=agent))
    return options


def check_agent(spec: str, source: str = "--super-agent") -> None:
    """Reject an agent name at start-up, not in every task (SUPER's harness accepted names it
    then rejected)."""
    from pytest_super.agents import load_agent

    try:
        load_agent(spec)
    except ValueError as exc:
        raise SettingError(f"{source}: {exc}") from None


#: the keywords of `SuperRun.resolve` beyond the settings (the table's and the providers')
_OTHER_KEYWORDS = ("agent", "set", "git_mirror")


def script_inputs(rootdir: Path, overrides: dict[str, object]) -> Inputs:
    known = {s.name for s in all_settings()} | set(_OTHER_KEYWORDS)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(
            f"SuperRun.resolve() got unknown settings {', '.join(unknown)}; known: "
            + ", ".join(sorted(known))
        )
    ini = find_ini(rootdir)
    base = ini.path.parent if ini.path else rootdir_without_ini(rootdir)
    roots = (
        ini_paths(cast("str | list[str]", ini.values["super_tasks"]), base)
        if "super_tasks" in ini.values
        else [Path("tasks")]
    )
    return Inputs(
        given=lambda name: overrides.get(name),
        given_source=lambda name: f"SuperRun.resolve({name}=...)",
        ini=lambda key: ini.values.get(key),
        ini_label=f" ({ini.path.name})" if ini.path else "",
        rootpath=base,
        invocation_dir=Path.cwd(),
        task_roots=tuple(Path(base, p).resolve() for p in roots),
    )


# -- the command line's shared options -------------------------------------------------------------
def add_shared_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """`--<name>` of a `pytest-super` subcommand, declared from the setting `name` of the table
    (its help and metavar: `--docker-host` says what `--super-docker-host` says), the table's
    or a provider's."""
    s = setting_named(name)
    parser.add_argument("--" + name.replace("_", "-"), default=None, metavar=s.metavar, help=s.help)


def resolve_setting(name: str, given: str | None) -> object:
    """A subcommand's shared option as a pytest run resolves its setting: the option, else the
    setting's environment variables, else its default (no ini file: the commands take none)."""
    return resolve_setting_source(name, given)[0]


def resolve_setting_source(name: str, given: str | None) -> tuple[object, str]:
    """`resolve_setting`'s value and where it came from (`--ray-address`, `environment variable
    RAY_ADDRESS`, `default`)."""
    flag = "--" + name.replace("_", "-")
    s = setting_named(name)
    inputs = Inputs(
        given=lambda _name: given,
        given_source=lambda _name: flag,
        ini=lambda _key: None,
        ini_label="",
        rootpath=Path.cwd(),
        invocation_dir=Path.cwd(),
        task_roots=(),
    )
    return resolve_one(inputs, name, s.read, s.default, ini=False, env=s.env)
