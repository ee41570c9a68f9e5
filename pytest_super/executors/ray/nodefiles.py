"""A task's folders on its Ray node, and their clean-up.

A task makes its own folder (`task_folder`: `pytest-super-node-<run>-<pid>-<start ticks>-*`,
marked with who made it) and shares the run's start-lock folder (`run_lock_folder`) with the run's
other tasks on the node. `cleanup_here` removes what is left of them, and has the kernel backend
remove what its kernels left on the node (its contract's clean-ups): the task at its end
(`node.cleanup_on_node`, asked by the controller), the task's watchdog once its Ray worker died
(`watchdog.py`), `pytest-super cleanup`. Below both `node` and
`watchdog`, so that the watchdog's process imports nothing of the Ray task's code.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pytest_super.kernels.base import KernelSettings

#: a task's folder on its node: pytest-super-node-<run id>-<pid>-<start ticks>-<random>
NODE_FOLDER_PREFIX = "pytest-super-node-"
#: in a task's folder: who made it (the run id and the Ray worker as
#: `process_identity.Holder.labels` names it)
OWNER_FILE = "owner.json"
#: in the run's start-lock folder: every task of the run on the node holds a shared lock on it
IN_USE_FILE = "in-use"


def run_lock_dir(run_id: str) -> Path:
    from pytest_super.locks import private_dir

    return private_dir() / f"ray-{run_id}"  # ours alone: nothing planted can block it


@contextlib.contextmanager
def run_lock_folder(run_id: str) -> Iterator[Path]:
    """The run's start-lock folder on this node, in use by this task for the block's length;
    removed after it when no other task of the run uses it."""
    from pytest_super.locks import open_lock_file, secure_folder

    folder = secure_folder(run_lock_dir(run_id))
    fd = open_lock_file(folder, IN_USE_FILE)
    assert fd is not None  # create=True never gives None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield folder
    finally:
        os.close(fd)  # the shared lock goes with it
        remove_if_unused(folder)


def remove_if_unused(folder: Path) -> bool:
    """Remove a run's start-lock folder that no task holds (its `in-use` file not locked)."""
    from pytest_super.locks import open_lock_file

    fd = open_lock_file(folder, IN_USE_FILE, create=False)
    if fd is None:
        if not folder.is_dir():
            return False
        shutil.rmtree(folder, ignore_errors=True)  # no task made it in-use: an old one's
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # another task of the run holds it
    else:
        shutil.rmtree(folder, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def task_folder(run_id: str) -> Path:
    """This task's folder on the node, named and marked so its run and its owner can be told."""
    from pytest_super.process_identity import Holder

    holder = Holder.of_this_process()
    folder = Path(
        tempfile.mkdtemp(
            prefix=f"{NODE_FOLDER_PREFIX}{run_id}-{holder.pid}-{holder.start_ticks or 0}-"
        )
    )
    (folder / OWNER_FILE).write_text(json.dumps({"run_id": run_id, **holder.labels()}))
    return folder


def stale_folders(run_id: str | None) -> list[Path]:
    """Task folders on this node left behind: the run's (`run_id`), or (None) those whose Ray
    worker is provably gone."""
    from pytest_super.process_identity import Holder

    found = []
    for folder in Path(tempfile.gettempdir()).glob(f"{NODE_FOLDER_PREFIX}*"):
        try:
            owner = json.loads((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not one of ours, or being made: left alone
        if not isinstance(owner, dict):
            continue
        if run_id is not None:
            if owner.get("run_id") == run_id:
                found.append(folder)
            continue
        holder = Holder.from_labels({k: str(v) for k, v in owner.items()})
        if holder is not None and holder.provably_gone():
            found.append(folder)
    return found


def cleanup_here(kernel: KernelSettings, run_id: str | None, *, every: bool = False) -> list[str]:
    """`cleanup_on_node`'s work on this machine (also the watchdog's, once a task's Ray worker
    died): the task folders, then the kernel backend's clean-up through its contract
    (`cleanup_run`, `cleanup_dead_runs`, or `every`: `cleanup_all`); the names it removed."""
    from pytest_super.kernels import cleanup_all, kernel_backend, on_node
    from pytest_super.locks import private_dir

    folders = [str(folder) for folder in stale_folders(run_id)]
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    lock_dirs = [run_lock_dir(run_id)] if run_id else list(private_dir().glob("ray-*"))
    for lock_dir in lock_dirs:
        if lock_dir.is_dir() and (run_id or remove_if_unused(lock_dir)):
            shutil.rmtree(lock_dir, ignore_errors=True)
    settings = on_node(kernel)  # the node's own engine, not the controller's
    if every:
        return cleanup_all(settings)
    backend = kernel_backend(settings)
    return backend.cleanup_run(settings, run_id) if run_id else backend.cleanup_dead_runs(settings)
