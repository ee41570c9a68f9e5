"""Scratch folders a signal cannot leave behind.

`tempfile.TemporaryDirectory` forgets its folder (detaches its finalizer) before it removes it, so
a Ctrl-C or SIGTERM whose exception lands while `shutil.rmtree` runs leaves the folder half
removed, and nothing removes the rest (CI of 4c95659: `pytest-super replay-run` stopped by
SIGINT left its `pytest-super-replay-*` folder). A `scratch_folder` is forgotten only once it is
gone: one whose removal was cut is removed by `remove_left` (called by `quiet_interrupts` as a
stopped command unwinds, with further signals ignored) or, at the latest, when the process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

_lock = threading.Lock()
#: the folders made and not yet removed (a removal cut by a signal's exception leaves one here)
_made: set[Path] = set()


@contextlib.contextmanager
def scratch_folder(prefix: str, *, under: Path | None = None) -> Iterator[Path]:
    """A new private folder (`prefix` + a random part, in `under` or the system's temporary
    folder), removed with all it holds when the block ends, however it ends."""
    path = _make(prefix, Path(under or tempfile.gettempdir()))
    try:
        yield path
    finally:
        _remove(path)


def remove_left() -> None:
    """Remove the scratch folders whose removal a signal's exception cut."""
    with _lock:
        left = list(_made)
    for path in left:
        shutil.rmtree(path, ignore_errors=True)
        _forget(path)


def _make(prefix: str, under: Path) -> Path:
    while True:
        path = under / f"{prefix}{secrets.token_hex(4)}"
        with _lock:  # known before it exists: a signal now leaves nothing unknown
            _made.add(path)
        try:
            path.mkdir(mode=0o700)
        except OSError as exc:  # not made; FileExistsError: another's (a 1 in 2**32 draw)
            _forget(path)
            if isinstance(exc, FileExistsError):
                continue
            raise
        return path


def _remove(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:  # gone already, or a file of it removed meanwhile: the rest
        shutil.rmtree(path, ignore_errors=True)
    _forget(path)  # only once gone


def _forget(path: Path) -> None:
    with _lock:
        _made.discard(path)


atexit.register(remove_left)
