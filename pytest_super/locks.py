"""Lock files that a planted file cannot block or redirect.

A lock with a fixed name in a folder others can write (the temporary folder) is a denial of
service waiting to happen: a FIFO at that name blocks `open()` forever, a symlink redirects it
(and a regular file of someone else's, locked and held, blocks `flock`). So:

- Locks shared by the processes of one user live in a folder only that user can write
  (`private_dir`): `$XDG_RUNTIME_DIR/pytest-super/locks`, else `$XDG_CACHE_HOME` (or
  `~/.cache`)`/pytest-super/locks`, else `<tmp>/pytest-super-locks-<uid>`; each is created 0700
  and used only when it, and the folder it is made in (but the shared temporary folder), are real
  folders (not symlinks) owned by us that neither group nor others can write (one of ours below
  that first folder that others can write is made 0700). A run's own lock folders
  (`secure_folder`) are checked the same way.
- A lock file is opened with `O_NOFOLLOW | O_NONBLOCK` and checked (`fstat`) to be a regular file
  owned by us; anything else at its name (a FIFO, a symlink, a socket) is removed and the file
  made again: in a folder only we can write, whatever is there is ours to replace.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pytest_super.errors import InfrastructureError

_OPEN_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LockFolderError(InfrastructureError):
    """No folder only this user can write could be found or made for a lock file."""

    retryable = False


def private_dir() -> Path:
    """The folder for this user's locks, made if missing (see the module's docstring)."""
    problems: list[str] = []
    for base, sub in _candidates():
        try:
            if base != Path(tempfile.gettempdir()):  # the shared one: only what we make in it
                with contextlib.suppress(OSError):  # ~/.cache may not exist yet
                    base.mkdir(mode=0o700, parents=True, exist_ok=True)
                _check_private(base, tighten=False)
            return secure_folder(base / sub, trusted_base=base)
        except LockFolderError as exc:
            problems.append(str(exc))
    raise LockFolderError(
        "no private folder for pytest-super's lock files: "
        + "; ".join(problems)
        + ". Set XDG_RUNTIME_DIR to a folder only you can write (mode 0700)."
    )


def _candidates() -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        found.append((Path(runtime), "pytest-super/locks"))
    cache = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(cache):
        found.append((Path(cache), "pytest-super/locks"))
    else:
        with contextlib.suppress(RuntimeError):  # no home folder
            found.append((Path.home() / ".cache", "pytest-super/locks"))
    found.append((Path(tempfile.gettempdir()), f"pytest-super-locks-{os.geteuid()}"))
    return found


def secure_folder(folder: Path, *, trusted_base: Path | None = None) -> Path:
    """Make `folder` (mode 0700, parents too) and check it and every folder below `trusted_base`
    on its way: real folders, owned by us, that neither group nor others can write (a sticky
    temporary folder as `trusted_base` itself is fine: nothing in it is trusted but what we made).
    Raises LockFolderError naming the folder that fails and why."""
    base = trusted_base or folder.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise LockFolderError(f"{folder} cannot be made ({exc.strerror})") from exc
    parts = folder.relative_to(base).parts
    for depth in range(1, len(parts) + 1):
        _check_private(base.joinpath(*parts[:depth]))
    return folder


def _check_private(path: Path, *, tighten: bool = True) -> None:
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise LockFolderError(f"{path} cannot be read ({exc.strerror})") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise LockFolderError(f"{path} is not a folder (a symlink or a file is there)")
    if info.st_uid != os.geteuid():
        raise LockFolderError(f"{path} belongs to user id {info.st_uid}, not to us")
    if info.st_mode & 0o022 and not tighten:
        raise LockFolderError(
            f"{path} can be written by others (mode {stat.S_IMODE(info.st_mode):o})"
        )
    if info.st_mode & 0o022:  # ours (made by an older version, or under umask 002): tighten it
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                os.fchmod(fd, 0o700)
            finally:
                os.close(fd)
        except OSError as exc:
            raise LockFolderError(
                f"{path} can be written by others (mode {stat.S_IMODE(info.st_mode):o}) and "
                f"cannot be made private ({exc.strerror}); make it 0700 (chmod 700 {path})"
            ) from exc


def open_lock_file(folder: Path, name: str, *, create: bool = True) -> int | None:
    """A descriptor of the regular file `name` in `folder` (made 0600 if missing and `create`),
    for `flock`; never a FIFO, device or symlink's target. None when it is missing and not
    `create`, or (not `create`) when something other than our regular file is there."""
    path = folder / name
    for _ in range(3):
        try:
            fd = os.open(path, _OPEN_FLAGS | (os.O_CREAT if create else 0), 0o600)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a symlink; ENXIO: a FIFO without reader; ...
            if not create:
                return None
            _replace(path, exc)
            continue
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
            return fd
        os.close(fd)
        if not create:
            return None
        _replace(path, None)
    raise LockFolderError(f"the lock file {path} could not be made a regular file of ours")


def _replace(path: Path, error: OSError | None) -> None:
    """Remove what is at `path` (not a lock file of ours) so that it can be made again."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        why = f" ({error.strerror})" if error is not None else ""
        raise LockFolderError(
            f"{path} is not a lock file{why} and cannot be removed ({exc.strerror}); remove it"
        ) from exc


@contextlib.contextmanager
def held_lock(folder: Path, name: str) -> Iterator[None]:
    """Hold the exclusive lock `name` in `folder` (waiting for it) for the block's duration."""
    fd = open_lock_file(folder, name)
    assert fd is not None  # create=True never gives None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
