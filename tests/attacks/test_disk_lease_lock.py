"""Round four of attacks (issue 29, causes 5, 7 and 8): the disk watch, leases, the lock files.

- cause 8: a FIFO or symlink planted at a lock's name (the image build lock, the slot and start
  locks, a box folder's owner file in the shared temporary folder) blocks or redirects nothing;
- cause 7: a run stopped with SIGSTOP past its lease's expiry keeps its containers through another
  run's start-up cleanup, and its task finishes after SIGCONT; a SIGKILLed holder's are removed;
- cause 5: the disk watch counts blocks and inodes, directories included (100,000 empty folders
  are stopped under --super-disk=64m), and a sparse file by what it holds (1 TiB of holes is not).

Each ran red on eb4ffc2 (the failures are quoted in the tests' docstrings).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from pytest_super.kernels import slots
from pytest_super.kernels.docker.cleanup import cleanup_containers
from pytest_super.kernels.docker.engine import LABEL_TASK
from pytest_super.kernels.docker.lease import (
    LABEL_LEASE,
    LEASE_FILE,
    TTL_S,
    engine_time,
    single_file_tar,
)
from tests.support.projects import (
    PASS,
    PytestRun,
    make_project,
    only_run_dir,
    results,
    run_dirs,
    run_pytest,
    task_yaml,
    wait_for,
)

REPO = Path(__file__).resolve().parents[2]
#: a planted file must not hold a lock up: each of these takes well under a second here
QUICK_S = 20.0
#: a user id that is not ours (the tests run as root or as a user; either way not this one)
STRANGER = 54321


@pytest.fixture
def tmpdirs() -> Iterator[dict[str, Path]]:
    """A temporary folder, a runtime folder and a home of the test's own (short: /tmp)."""
    root = Path(tempfile.mkdtemp(prefix="h4-", dir="/tmp"))
    made = {name: root / name for name in ("tmp", "run", "home")}
    for path in made.values():
        path.mkdir(mode=0o700)
    yield made
    shutil.rmtree(root, ignore_errors=True)


def _env(dirs: dict[str, Path]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "XDG_CACHE_HOME")}
    return {
        **env,
        "TMPDIR": str(dirs["tmp"]),
        "XDG_RUNTIME_DIR": str(dirs["run"]),
        "HOME": str(dirs["home"]),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }


def _python(code: str, env: dict[str, str], timeout: float = QUICK_S) -> str:
    """Run `code` in a fresh interpreter; fail (not hang) when it takes more than `timeout`."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"blocked: still running after {timeout} s")
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - started < timeout
    return done.stdout


def _plant(path: Path, kind: str, victim: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(victim)


# -- cause 8: lock files --------------------------------------------------------------------------
OLD_BUILD_LOCK = f"pytest-super-image-build-{os.getuid()}.lock"


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_planted_build_lock_neither_blocks_nor_redirects_a_build(tmpdirs, kind) -> None:
    """Red on eb4ffc2: with a FIFO at /tmp/pytest-super-image-build-<uid>.lock the build lock
    blocked (still running after 20 s); with a symlink there, it created the symlink's target."""
    victim = tmpdirs["home"] / "victim"
    new_lock = tmpdirs["run"] / "pytest-super" / "locks" / "image-build.lock"
    for path in (tmpdirs["tmp"] / OLD_BUILD_LOCK, new_lock):
        _plant(path, kind, victim)
    out = _python(
        """
        from pytest_super.kernels.docker.image import _build_lock
        with _build_lock():
            print("held")
        with _build_lock():  # and again: the lock file made the first time is used
            print("held again")
        """,
        _env(tmpdirs),
    )
    assert out.split() == ["held", "held", "again"]
    assert not victim.exists(), "the lock followed the planted symlink"
    assert new_lock.is_file() and not new_lock.is_symlink()
    assert (new_lock.parent.stat().st_mode & 0o022) == 0


#: `pytest-super image build` arguments: the image present (no lock taken), and a build that takes
#: the lock, then fails at once (its base is not on the engine and --offline forbids a pull)
BUILDS = {
    "present": ([], 0, ""),
    "locked": (
        ["--tag", "pytest-super-h4:none", "--base", "pytest-super-h4-no-base:none", "--offline"],
        1,
        "--offline forbids pulling it",
    ),
}


@pytest.mark.docker
@pytest.mark.parametrize("build", sorted(BUILDS))
def test_image_build_finishes_with_fifos_at_the_lock_names(tmpdirs, image, build) -> None:
    """`pytest-super image build` with FIFOs planted at the old and new lock names: done in
    seconds. Red on eb4ffc2 for the build that takes the lock: still running after 20 s."""
    args, expected_code, expected_text = BUILDS[build]
    for path in (
        tmpdirs["tmp"] / OLD_BUILD_LOCK,
        tmpdirs["run"] / "pytest-super" / "locks" / "image-build.lock",
    ):
        _plant(path, "fifo", tmpdirs["home"] / "victim")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "pytest-super"), "image", "build", *args],
            env=_env(tmpdirs),
            capture_output=True,
            text=True,
            timeout=QUICK_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"blocked: still running after {QUICK_S} s")
    assert done.returncode == expected_code, done.stderr
    assert expected_text in done.stderr
    assert time.monotonic() - started < QUICK_S


def test_the_lock_folder_is_private_or_not_used(tmpdirs, monkeypatch) -> None:
    """A runtime folder another user owns, or a symlink in place of the lock folder, is never
    used: the next candidate (the home's cache) is; a folder of ours that others could write is
    made private."""
    from pytest_super.locks import LockFolderError, private_dir, secure_folder

    monkeypatch.setenv("HOME", str(tmpdirs["home"]))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    foreign = tmpdirs["run"] / "foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, STRANGER, STRANGER)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(foreign))
    assert private_dir() == tmpdirs["home"] / ".cache" / "pytest-super" / "locks"

    elsewhere = tmpdirs["tmp"] / "elsewhere"
    elsewhere.mkdir()
    (tmpdirs["run"] / "pytest-super").mkdir()
    (tmpdirs["run"] / "pytest-super" / "locks").symlink_to(elsewhere)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmpdirs["run"]))
    assert private_dir() == tmpdirs["home"] / ".cache" / "pytest-super" / "locks"

    loose = tmpdirs["tmp"] / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    assert secure_folder(loose) == loose and (loose.stat().st_mode & 0o777) == 0o700
    os.chown(loose, STRANGER, STRANGER)
    with pytest.raises(LockFolderError, match=f"{loose} belongs to user id {STRANGER}"):
        secure_folder(loose)


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_planted_slot_and_start_locks_neither_block_nor_redirect(tmpdirs, kind) -> None:
    """The run's slot and start locks (kernels/slots.py) and the Ray nodes' start lock, siblings
    of the build lock. Red on eb4ffc2 (symlink): the slot and start locks created the target."""
    lock_dir = tmpdirs["tmp"] / "locks"
    victim = tmpdirs["home"] / "victim"
    for name in ("slot-0.lock", "start.lock", "waiting-1-1.lock"):
        _plant(lock_dir / name, kind, victim)
    started = time.monotonic()
    slot = slots.take_slot(lock_dir, 1)
    assert slot is not None and slot.number == 0
    assert not slots.someone_waits(lock_dir)
    with slots.start_lock(lock_dir):
        pass
    slot.release()
    assert time.monotonic() - started < QUICK_S
    assert not victim.exists(), "a lock followed the planted symlink"
    for name in ("slot-0.lock", "start.lock"):
        assert (lock_dir / name).is_file() and not (lock_dir / name).is_symlink()


@pytest.mark.docker
def test_a_planted_owner_file_does_not_block_the_host_folder_cleanup(tmpdirs, engine) -> None:
    """Start-up cleanup reads the owner file of every `pytest-super-kernel-*` folder in the
    temporary folder. Red on eb4ffc2: a FIFO as owner file there blocked it (still running after
    20 s). A folder someone else owns there is not touched."""
    planted = tmpdirs["tmp"] / "pytest-super-kernel-fifo0001"
    planted.mkdir()
    os.mkfifo(planted / "owner.json")
    foreign = tmpdirs["tmp"] / "pytest-super-kernel-foreign1"
    (foreign / "ipc").mkdir(parents=True)
    old = time.time() - 3600
    os.utime(foreign, (old, old))
    os.chown(foreign, STRANGER, STRANGER)
    _python(
        """
        from pytest_super.kernels.docker.cleanup import cleanup_host_folders
        from pytest_super.kernels.docker.engine import docker_client_for
        print(cleanup_host_folders(docker_client_for(None)))
        """,
        _env(tmpdirs),
    )
    assert foreign.is_dir(), "another user's folder was removed"


# -- cause 7: a stopped run keeps its containers ---------------------------------------------------
#: the task of the run that is stopped: marks that its cell runs, then works a while
MARK_THEN_SLEEP = (
    "open('/tmp/started', 'w').close()\nimport time\ntime.sleep(30)\nprint('{\"x\": 1}')"
)


def _age_lease(engine: docker.DockerClient, lease_id: str) -> None:
    """Write the lease's renewal time back by ten times its expiry (the holder, stopped, does not
    renew it): by the clock alone it is long dead."""
    name = f"pytest-super-lease-{lease_id}"
    stream, _ = engine.api.get_archive(name, f"/{LEASE_FILE}")
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.extractfile(LEASE_FILE)
        assert member is not None
        data = json.loads(member.read())
    data["renewed"] = engine_time(engine) - 10 * TTL_S
    engine.api.put_archive(name, "/", single_file_tar(LEASE_FILE, json.dumps(data).encode()))


def _started_box(engine: docker.DockerClient, task_id: str) -> Any:
    """The task's container once its cell runs (it made /tmp/started)."""

    def started() -> Any:
        for box in engine.containers.list(filters={"label": f"{LABEL_TASK}={task_id}"}):
            with contextlib.suppress(docker.errors.APIError):
                if box.exec_run(["test", "-e", "/tmp/started"]).exit_code == 0:
                    return box
        return None

    return wait_for(started, 180, f"the cell of {task_id} to run", poll=0.5)


@pytest.mark.docker
@pytest.mark.parametrize("signal_name", ["SIGSTOP", "SIGKILL"])
def test_another_runs_cleanup_spares_a_stopped_run_not_a_killed_one(
    project_dir: Path, engine: docker.DockerClient, signal_name: str
) -> None:
    """A run is stopped (Ctrl-Z: SIGSTOP) while its task's cell runs, its lease written back to
    ten times its expiry; another run starts (its start-up cleanup removes dead runs'
    containers). Red on eb4ffc2: the stopped run's container was removed (the lease judged by the
    clock). Now it is left, and after SIGCONT the task passes. The converse: a run killed with
    SIGKILL has its container removed by the other run's start-up cleanup."""
    suffix = uuid.uuid4().hex[:6]
    held, other = f"held_{suffix}", f"other_{suffix}"
    held_dir = make_project(
        project_dir / "held", {f"expert/{held}": task_yaml(held, MARK_THEN_SLEEP)}
    )
    other_dir = make_project(project_dir / "other", {f"expert/{other}": task_yaml(other, PASS)})
    args = ("tasks", "--super-agent=gold", "-p", "no:cacheprovider")
    # the stopped run holds the dead man's switch: the engine's reaper must spare it too; the
    # killed one does not, so that it is the other run's start-up cleanup that removes its box
    # (tests/test_dead_man_switch.py tests the reaper removing a killed run's)
    switch = {"PYTEST_SUPER_DEAD_MAN_SWITCH": "on" if signal_name == "SIGSTOP" else "off"}
    run = PytestRun(held_dir, *args, env=switch)
    try:
        box = _started_box(engine, held)
        os.killpg(run.pid, getattr(signal, signal_name))
        if signal_name == "SIGSTOP":
            _age_lease(engine, box.labels[LABEL_LEASE])
        else:
            run.proc.wait(timeout=30)  # reaped: its pid names nothing now
        code, out = run_pytest(other_dir, *args, timeout=300)
        assert code == 0, out[-3000:]
        left = engine.containers.list(all=True, filters={"id": box.id})
        if signal_name == "SIGKILL":
            assert left == [], "the killed run's container was left"
            return
        assert [c.id for c in left] == [box.id], "the stopped run's container was removed"
        cleanup = subprocess.run(  # `pytest-super cleanup` judges dead runs the same way
            [str(Path(sys.executable).parent / "pytest-super"), "cleanup"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cleanup.returncode == 0, cleanup.stderr
        left = engine.containers.list(all=True, filters={"id": box.id})
        assert [c.id for c in left] == [box.id], "`pytest-super cleanup` removed it"
        os.killpg(run.pid, signal.SIGCONT)
        assert run.wait(300) == 0, run.output()[-3000:]
        [line] = results(only_run_dir(held_dir))
        assert (line["outcome"], line["exit_status"]) == ("passed", "submitted"), line
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGCONT)
        if run.proc.poll() is None:
            run.kill_group()
        for folder in (held_dir, other_dir):
            for run_dir in run_dirs(folder):
                cleanup_containers(engine, run_id=run_dir.name)


# -- cause 5: the disk watch counts blocks and inodes ----------------------------------------------
ANSWER = "time.sleep(8)  # the watch polls every 1-5 s\nprint('{\"x\": 1}')"
#: what each task writes under --super-disk=64m, and whether it must be stopped
DISK_TASKS = {
    # 100,000 empty folders: 391 MiB of blocks, 100,000 inodes (the engine's size: 0)
    "dirs": ("for i in range(100_000):\n    os.mkdir(f'/content/d{i}')", True),
    # 100,000 empty files: no blocks but the folder's own, 100,000 inodes
    "files": ("for i in range(100_000):\n    open(f'/content/f{i}', 'w').close()", True),
    # 1 TiB of holes: no block written (the engine's size: 1 TiB)
    "sparse": ("with open('/content/sparse', 'wb') as f:\n    f.truncate(1 << 40)", False),
    # one byte at the end of 1 TiB: one block
    "sparse_tail": (
        "with open('/content/tail', 'wb') as f:\n    f.seek((1 << 40) - 1)\n    f.write(b'x')",
        False,
    ),
}


@pytest.mark.docker
def test_the_disk_watch_counts_blocks_and_inodes_not_apparent_sizes(
    project_dir: Path, engine: docker.DockerClient
) -> None:
    """Under --super-disk=64m. Red on eb4ffc2: 100,000 empty folders and 100,000 empty files
    passed (the engine's size of the layer leaves folders out and counts no inodes), and a 1 TiB
    sparse file holding nothing ended `disk_limit` (the engine counts apparent sizes)."""
    tasks = {
        f"expert/{name}": task_yaml(name, f"import os, time\n{code}\n{ANSWER}")
        for name, (code, _) in DISK_TASKS.items()
    }
    make_project(project_dir, tasks)
    args = ("tasks", "--super-agent=gold", "--super-disk=64m", "--super-mem=1g", "-n", "2")
    code, out = run_pytest(project_dir, *args, "-p", "no:cacheprovider", timeout=600)
    lines = {r["task_id"]: r for r in results(only_run_dir(project_dir))}
    assert sorted(lines) == sorted(DISK_TASKS), out[-3000:]
    for name, (_, stopped) in DISK_TASKS.items():
        line = lines[name]
        expected = ("failed", "disk_limit") if stopped else ("passed", "submitted")
        assert (line["outcome"], line["exit_status"]) == expected, (name, line, out[-3000:])
    detail = json.loads(Path(lines["files"]["trajectory"]).with_suffix(".json").read_text())
    assert "inodes" in detail["info"]["detail"], detail["info"]
    assert code == 1


def test_a_folder_is_measured_by_its_blocks_and_inodes(tmp_path: Path) -> None:
    """The walk the watch makes of a layer: folders count their blocks, a sparse file what it
    holds, a hard link nothing more, a symlink is not followed, a path past PATH_MAX is reached."""
    from pytest_super.kernels.docker.diskwatch import folder_use

    top = tmp_path / "layer"
    top.mkdir()
    empty = folder_use(str(top))
    assert empty is not None and empty.inodes == 1
    for i in range(100):
        (top / f"d{i}").mkdir()
    with open(top / "sparse", "wb") as f:
        f.truncate(1 << 40)
    (top / "data").write_bytes(os.urandom(1 << 20))
    os.link(top / "data", top / "data-link")
    (top / "outside").symlink_to(REPO)
    deep = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(20):  # 20 x 251 characters: past PATH_MAX from the top
        os.mkdir("d" * 250, dir_fd=deep)
        deep, parent = os.open("d" * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=deep), deep
        os.close(parent)
    with open(os.open("deep.bin", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=deep), "wb") as f:
        f.write(os.urandom(1 << 20))
    os.close(deep)
    use = folder_use(str(top))
    assert use is not None
    # the top, 100 + 20 folders, sparse, data (one inode for two names), the symlink, deep.bin
    assert use.inodes == 1 + 120 + 1 + 1 + 1 + 1
    folder = (top / "d0").stat().st_blocks * 512  # 4 KiB on ext4 (0 on tmpfs)
    blocks = 2 * (1 << 20) + 120 * folder  # two files of 1 MiB (one of them linked twice)
    assert blocks <= use.bytes < blocks + (1 << 20), use
    assert folder_use(str(top / "outside")) is None  # a symlink is not a folder to walk


WATCH_ONCE = """
import json, sys, time, warnings
from pytest_super.kernels.docker.engine import docker_client_for
from pytest_super.kernels.docker.diskwatch import DiskWatch, DiskWatchWarning

container_id = sys.argv[1]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    watch = DiskWatch(docker_client_for(None).api)
    stopped = []
    end = watch.watch(container_id, 1 << 20, lambda use, limits: stopped.append(use))
    watch.poll(only=container_id)  # (or the watch's own thread was first)
    deadline = time.monotonic() + 10
    while not stopped and time.monotonic() < deadline:
        time.sleep(0.05)
    end()
warned = [str(w.message) for w in caught if issubclass(w.category, DiskWatchWarning)]
use = stopped[0]
print(json.dumps({"bytes": use.bytes, "inodes": use.inodes, "stopped": len(stopped), "warned": warned}))
"""


@pytest.mark.docker
@pytest.mark.parametrize("where", ["layer on this host", "layer not on this host"])
def test_the_watch_walks_the_layer_here_else_warns_and_asks_the_engine(
    engine: docker.DockerClient, image: str, where: str
) -> None:
    """A container that wrote 3,000,000 bytes, watched under a 1 MiB limit: stopped either way.
    With its layer on this host the walk counts blocks and inodes; where the layer cannot be
    read (here: the engine's data root hidden by a mount namespace of the watch's own, as on a
    remote engine or for a user who may not read it) the engine's size is used, without inodes,
    and a DiskWatchWarning says so."""
    box = engine.containers.run(
        image,
        ["sh", "-c", "head -c 3000000 /dev/urandom > /written && touch /done && sleep 120"],
        detach=True,
        network_disabled=True,
        name=f"pytest-super-h4-watch-{uuid.uuid4().hex[:8]}",
    )
    try:
        wait_for(lambda: box.exec_run(["test", "-e", "/done"]).exit_code == 0, 60, "the write")
        command = [sys.executable, "-c", WATCH_ONCE, box.id]
        if where == "layer not on this host":
            root = engine.info()["DockerRootDir"]
            script = f'mount -t tmpfs none "{root}" && exec "$@"'
            command = ["unshare", "--mount", "sh", "-c", script, "sh", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPO)
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout)
        assert seen["stopped"] == 1 and seen["bytes"] >= 3_000_000, seen
        if where == "layer on this host":
            assert seen["inodes"] and seen["bytes"] % 512 == 0 and not seen["warned"], seen
        else:
            assert seen["inodes"] is None and len(seen["warned"]) == 1, seen
            assert "cannot read the containers' writable layers" in seen["warned"][0]
    finally:
        box.remove(force=True)
