"""The ini file a pytest run reads, found and read as pytest finds and reads it, without importing
pytest (a script's process loads none; pytest offers no public call for this).

`find_ini` follows pytest's own search, `_pytest.config.findpaths.locate_config` (pytest 9): in
the folder, then each of its parents, the first of pytest.toml, .pytest.toml, pytest.ini,
.pytest.ini, pyproject.toml with a [tool.pytest] (or [tool.pytest.ini_options]) table, tox.ini
with [pytest], setup.cfg with [tool:pytest]. The TOML files are read with `tomllib` (`tomli`
before Python 3.11, as pytest does), the others with `iniconfig`, the parser pytest uses. With
no file found, `rootdir_without_ini` is the rootdir pytest takes
(`_pytest.config.findpaths.determine_setup`). A file that does not read, or a key of ours of a
type no setting takes, is a `SettingError` naming the file and the key.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_super import safe_read
from pytest_super.settings.readers import SettingError

#: pytest's config files in the order it tries them in each folder, and the table each is read
#: from (None: the file counts even without one)
_INI_FILES = (
    ("pytest.toml", "pytest"),
    (".pytest.toml", "pytest"),
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", "tool.pytest"),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)


@dataclass(frozen=True)
class IniFile:
    """The ini file a pytest run in a folder reads (`path` None: none found) and its values."""

    path: Path | None
    values: Mapping[str, object]


def _toml_section(path: Path, table: str) -> dict[str, object] | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # as pytest reads TOML before Python 3.11
        import tomli as tomllib  # type: ignore[import-not-found]

    try:
        document = tomllib.loads(safe_read.read_text_file(path))
    except safe_read.ForeignDataError as exc:
        raise SettingError(f"{exc}") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise SettingError(f"{path}: not TOML ({exc})") from None
    if table == "pytest":
        return _checked_values(path, "[pytest]", _table(path, document, "pytest") or {})
    tool = _table(path, document, "tool")
    pytest_table = _table(path, tool or {}, "tool.pytest")
    if pytest_table is None:
        return None
    native = {k: v for k, v in pytest_table.items() if k != "ini_options"}
    if native:
        return _checked_values(path, "[tool.pytest]", native)
    options = _table(path, pytest_table, "tool.pytest.ini_options") or {}
    return _checked_values(path, "[tool.pytest.ini_options]", options)


def _table(path: Path, parent: Mapping[str, object], name: str) -> dict[str, object] | None:
    """The TOML table `name` (dotted, its last part a key of `parent`); None if absent."""
    value = parent.get(name.rpartition(".")[2])
    if value is None or isinstance(value, dict):
        return value
    raise SettingError(
        f"{path}: {name} is {type(value).__name__} {value!r:.60}, not a table; write it as "
        f"[{name}] with its keys below it, or remove it"
    )


#: ini keys of ours whose value is a list (pytest's `paths` and `linelist`)
_LIST_KEYS = ("super_tasks", "super_git_mirrors")


def _checked_values(path: Path, table: str, values: dict[str, object]) -> dict[str, object]:
    """Our keys' values as the settings read them: text, a number or true/false; a list of text
    for the list keys. Anything else is a SettingError naming the file and key."""
    for key, value in values.items():
        if not key.startswith("super_"):
            continue
        if key in _LIST_KEYS:
            ok = isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
            )
        else:
            ok = isinstance(value, str | int | float | bool)
        if not ok:
            wanted = "a text or a list of texts" if key in _LIST_KEYS else 'a text such as "2g"'
            raise SettingError(
                f"{path}: {table} {key} = {value!r:.60} is a {type(value).__name__}, not "
                f'{wanted}; write it as {key} = "..."'
            )
    return values


def _ini_section(path: Path, section: str | None) -> dict[str, object] | None:
    import iniconfig

    try:
        parsed = iniconfig.IniConfig(str(path), data=safe_read.read_text_file(path))
    except safe_read.ForeignDataError as exc:
        raise SettingError(f"{exc}") from None
    except iniconfig.ParseError as exc:
        raise SettingError(str(exc)) from None
    name = section or "pytest"
    if name in parsed:
        return dict(parsed[name].items())
    return {} if section is None else None


def find_ini(rootdir: Path) -> IniFile:
    """The config file pytest started in `rootdir` reads: the first of `_INI_FILES` with pytest's
    table in `rootdir` or its nearest ancestor (pytest.ini always counts)."""
    for base in (rootdir, *rootdir.parents):
        for name, table in _INI_FILES:
            path = base / name
            if not path.is_file():
                continue
            if name.endswith(".toml"):
                values = _toml_section(path, table or "pytest")
            else:
                values = _ini_section(path, table)
            if values is not None:
                return IniFile(path, values)
    return IniFile(None, {})


def rootdir_without_ini(start: Path) -> Path:
    """The rootdir pytest started in `start` without arguments takes when it finds no config file
    (`_pytest.config.findpaths.determine_setup`, pytest 9): the folder of the nearest
    pyproject.toml, even one without a [tool.pytest] table, else of the nearest setup.py, else
    `start` itself."""
    for name in ("pyproject.toml", "setup.py"):
        for base in (start, *start.parents):
            if (base / name).is_file():
                return base
    return start


def ini_lines(value: str | Iterable[object]) -> list[str]:
    """An ini `linelist` as pytest reads it: one entry per non-empty line, or a TOML list."""
    if isinstance(value, str):
        return [line.strip() for line in value.split("\n") if line.strip()]
    return [str(v) for v in value]


def ini_paths(value: str | Iterable[object], base: Path) -> list[Path]:
    """An ini `paths` value as pytest reads it: shell words, relative to the ini file's folder."""
    words = shlex.split(value) if isinstance(value, str) else [str(v) for v in value]
    return [base / w for w in words]
