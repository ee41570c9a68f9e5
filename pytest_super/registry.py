"""Plug-ins found by name: a built-in one, a third-party one registered under an entry-point group,
or `package.module:Class`. Agents (`agents/__init__.py`, group `pytest_super.agents`) and kernel
backends (`kernels/__init__.py`, group `pytest_super.backends`) are found this way.

A built-in name wins over an entry point of the same name; built-ins need no entry point (they are
found from a source checkout that was never installed, and scanning the installed packages' metadata
is skipped for them).

The installed packages' entry points are scanned once (`entry_points_of`) while the folders of
`sys.path` that hold distributions' metadata stay as they are: every pytest start reads the
executors' and the backends' groups (their settings, settings/providers.py) and finds a
third-party one by name, and each would otherwise read every installed distribution's metadata
again. A folder put on `sys.path`, or a distribution installed into one, removed or changed (its
metadata folder comes, goes or gets another mtime), is seen at the next look-up; anything else
written beside them (the `__pycache__` of a module imported from the folder) is not a change.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import Any


@dataclass(frozen=True)
class Registry:
    """One kind of plug-in. `kind` names one in messages ("agent"), `plural` several ("agents");
    `builtins` maps each built-in name to its `module:Class`, imported only when asked for."""

    kind: str
    plural: str
    group: str
    builtins: Mapping[str, str]

    def entry_points(self) -> dict[str, EntryPoint]:
        """The entry points registered under the group, by name."""
        return dict(entry_points_of(self.group))

    def known_names(self) -> list[str]:
        """Built-in names, then the entry points' names (sorted)."""
        return list(self.builtins) + sorted(set(self.entry_points()) - set(self.builtins))

    def find(self, spec: str) -> Any:  # Any: what an entry point or getattr loads
        """What `spec` names (a built-in name, an entry point's name, or `module:Class`), imported;
        ValueError, saying why, if it names nothing that imports."""
        if spec in self.builtins:
            return self._import(self.builtins[spec], spec)
        plugins = self.entry_points()
        if spec in plugins:
            try:
                return plugins[spec].load()
            except (ImportError, AttributeError) as exc:
                raise ValueError(
                    f"{self.kind} {spec!r}: entry point {plugins[spec].value!r} of group "
                    f"{self.group!r} does not load: {exc}"
                ) from exc
        if ":" in spec:
            return self._import(spec, spec)
        raise ValueError(
            f"unknown {self.kind} {spec!r}; known {self.plural}: {', '.join(self.known_names())}, "
            "or give `package.module:Class`"
        )

    def make(
        self, spec: str, protocol: type, needs: str
    ) -> Any:  # Any: what an entry point loads (mypy takes no Protocol for a `type[T]`)
        """An instance of what `spec` names, made without arguments; ValueError unless it
        satisfies `protocol` (a runtime-checkable Protocol), saying what it `needs`."""
        cls = self.find(spec)
        made = cls()
        if not isinstance(made, protocol):
            article = "an" if self.kind[:1] in "aeiou" else "a"
            raise ValueError(
                f"{self.kind} {spec!r} ({qualified_name(cls)}) is not {article} {self.kind}: "
                f"it needs {needs}"
            )
        return made

    def _import(self, target: str, spec: str) -> Any:  # Any: getattr of an imported module
        module_name, _, attr = target.partition(":")
        if not module_name or not attr:
            raise ValueError(f"{self.kind} {spec!r}: give `package.module:Class`")
        try:
            module = import_module(module_name)
        except ImportError as exc:
            raise ValueError(
                f"{self.kind} {spec!r}: cannot import module {module_name!r}: {exc}"
            ) from exc
        try:
            return getattr(module, attr)
        except AttributeError:
            raise ValueError(
                f"{self.kind} {spec!r}: module {module_name!r} has no {attr!r}"
            ) from None


def entry_points_of(group: str) -> Mapping[str, EntryPoint]:
    """The entry points registered under `group`, by name (of two of one name, the later
    distribution's, as `importlib.metadata` lists them), from the one scan of `sys.path`."""
    return _scan(_metadata_folders()).get(group, {})


#: what a scan of the entry points reads: each folder of `sys.path` holding distributions'
#: metadata, with the name and modification time of each metadata folder (`*.dist-info`,
#: `*.egg-info`) in it
MetadataFolders = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]


def _metadata_folders() -> MetadataFolders:
    """The folders of `sys.path` that hold a distribution's metadata, each with its metadata
    folders' names and modification times. Not the folder's own modification time: a module
    imported from it writes its `__pycache__` there (issue 42: a scan for each such import)."""
    found = []
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as names:
                metadata = sorted(
                    (n.name, n.stat().st_mtime_ns)
                    for n in names
                    if n.name.endswith((".dist-info", ".egg-info"))
                )
        except OSError:  # gone, not a folder (a zip file): no metadata we read
            continue
        if metadata:
            found.append((entry, tuple(metadata)))
    return tuple(found)


@functools.lru_cache(maxsize=4)
def _scan(folders: MetadataFolders) -> dict[str, dict[str, EntryPoint]]:
    """Every installed entry point, by group and name: one read of the installed packages'
    metadata while `folders` (the cache's key: importlib.metadata reads sys.path itself) hold."""
    del folders
    found = entry_points()  # read once; `groups` and `select` (no warning on 3.10, 3.11) sort it
    return {group: {ep.name: ep for ep in found.select(group=group)} for group in found.groups}


def qualified_name(obj: object) -> str:
    """`module.QualName` of a class or function (of an object's type otherwise), for messages."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(name, str)):
        module, name = type(obj).__module__, type(obj).__qualname__
    return f"{module}.{name}"
