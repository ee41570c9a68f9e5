"""The kernel pool on the real engine: a task's kernel is made while the task before it runs, has run
nothing before its task, is never handed to a task of another key, counts against the container cap,
and every container (warm, in use, being removed) is gone when the session ends.

The end-to-end tests run pytest on a small project of gold tasks (the helpers of test_scale.py);
the others drive `KernelPool` directly with the real docker backend.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_super.kernels import provision_kernel, slots
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker.engine import LABEL_TASK, docker_client_for
from pytest_super.kernels.pool import KernelPool, PooledKernel, Reaper, kernel_key
from tests.support.projects import (  # the helpers of the scale tests: same projects, same processes
    EngineEvents,
    containers,
    make_project,
    only_run_dir,
    outcomes,
    run_dirs,
    run_pytest,
)

pytestmark = pytest.mark.docker


# What a task sees of its kernel. The answer is what a kernel that ran nothing before shows: this
# cell is the only one in its history (IPython's In holds '' and the cell), nothing is in Out, no
# marker of an earlier cell exists in the container, the working directory is /content. The
# hostname (the container id) and the environment's names go to the output, for the test.
FIRST_CELL = """\
import json, os, socket, time
seen = os.listdir("/tmp/pool-marker") if os.path.isdir("/tmp/pool-marker") else []
os.makedirs("/tmp/pool-marker", exist_ok=True)
open("/tmp/pool-marker/" + socket.gethostname(), "w").close()
print("host:", socket.gethostname())
print("env:", json.dumps(sorted(k for k in os.environ if k != "HOSTNAME")))
time.sleep(3)  # long enough for the next task's kernel to be started meanwhile
print(json.dumps({"cells": len(In) - 1, "outputs": len(Out), "seen": len(seen), "cwd": os.getcwd()}))
"""
FIRST_ANSWER = {"cells": 1, "outputs": 0, "seen": 0, "cwd": "/content"}
TASKS = ("first_a", "first_b", "first_c")


def first_cell_task(task_id: str) -> str:
    doc = {
        "id": task_id,
        "query": "Report what the kernel has seen.",
        "answer": FIRST_ANSWER,
        "solution": [{"execute": FIRST_CELL}],
    }
    return json.dumps(doc)  # JSON is YAML


def seen_by_task(run_dir: Path, task_id: str) -> dict[str, Any]:
    steps = json.loads((run_dir / "trajectories" / f"{task_id}.json").read_text())["steps"]
    output = steps[0]["output"]
    lines = dict(ln.split(": ", 1) for ln in output.splitlines() if ln.startswith(("host", "env")))
    return {"host": lines["host"], "env": json.loads(lines["env"])}


def run_first_cell_tasks(project: Path, *options: str) -> tuple[Path, EngineEvents]:
    """The run's folder, and the engine's container events while it ran."""
    make_project(project, {f"expert/{t}": first_cell_task(t) for t in TASKS})
    for old in run_dirs(project):
        old.rename(project / f"old-{old.name}")
    with EngineEvents(docker_client_for(None)) as events:
        code, out = run_pytest(project, "tasks", "--super-agent=gold", "-n", "1", *options)
    assert code == 0, out
    return only_run_dir(project), events


def lifetimes(events: EngineEvents, run_id: str) -> dict[str, tuple[int, int]]:
    """task -> (created, destroyed) in the engine's own nanosecond clock."""
    created = events.of(run_id, "create")
    tasks = [e["Actor"]["Attributes"][LABEL_TASK] for e in created]
    assert len(tasks) == len(set(tasks)), f"one task, one container: {tasks}"
    destroyed = {e["id"]: e["timeNano"] for e in events.of(run_id, "destroy")}
    return {
        e["Actor"]["Attributes"][LABEL_TASK]: (e["timeNano"], destroyed[e["id"]]) for e in created
    }


# -- end to end ------------------------------------------------------------------------------------
def test_pooled_kernels_are_made_ahead_and_fresh(project_dir, engine):
    run_dir, events = run_first_cell_tasks(project_dir)
    assert outcomes(run_dir) == dict.fromkeys(TASKS, "passed")  # the cell's answer says: fresh
    seen = {t: seen_by_task(run_dir, t) for t in TASKS}
    assert len({s["host"] for s in seen.values()}) == 3, "one task, one container"
    assert containers(engine, run_id=run_dir.name) == []

    # made ahead: each next task's container was created while the one before it still lived
    # (the engine's own record), exactly one container per task, none left over
    life = lifetimes(events, run_dir.name)
    assert sorted(life) == sorted(TASKS)
    for before, after in zip(TASKS, TASKS[1:], strict=False):
        assert life[after][0] < life[before][1], f"{after}'s kernel was not made while {before} ran"

    # the same tasks without the pool: made when asked, each removed before the next is made;
    # a task sees the same environment either way
    plain_dir, plain_events = run_first_cell_tasks(project_dir, "--no-super-pool")
    assert outcomes(plain_dir) == dict.fromkeys(TASKS, "passed")
    life = lifetimes(plain_events, plain_dir.name)
    for before, after in zip(TASKS, TASKS[1:], strict=False):
        assert life[before][1] < life[after][0]
    for task in TASKS:
        assert seen_by_task(plain_dir, task)["env"] == seen[task]["env"]
    assert containers(engine, run_id=plain_dir.name) == []


# -- the pool itself -------------------------------------------------------------------------------
@pytest.fixture
def settings(image: str, tmp_path: Path, engine: docker.DockerClient):
    """Kernel settings of a run of this test's own; its containers are removed after it."""
    run_id = f"pooltest-{tmp_path.name}"[-40:]
    yield KernelSettings(run_id=run_id, worker="pooltest")
    from pytest_super.kernels.docker.cleanup import cleanup_containers

    cleanup_containers(engine, run_id=run_id)


def wait_until(predicate: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return value


def test_a_warm_kernel_goes_only_to_its_own_key(settings, engine, tmp_path):
    pool = KernelPool(provision_kernel, lock_dir=tmp_path / "locks")
    pool.warm(settings, "nextone")
    (warm_box,) = wait_until(lambda: containers(engine, run_id=settings.run_id, task="nextone"))

    other = dataclasses.replace(settings, mem="3g")  # same task, other limits: another key
    kernel = pool.take(other, "nextone")
    assert warm_box.id[:12] not in kernel.description
    boxes = {c.id: c for c in containers(engine, run_id=settings.run_id, task="nextone")}
    assert warm_box.id in boxes and len(boxes) == 2  # the warm one waits for its own task
    (taken,) = (box for box_id, box in boxes.items() if box_id != warm_box.id)
    assert taken.attrs["HostConfig"]["Memory"] == 3 * 1024**3
    kernel.close()

    pool.warm(settings, "another")  # the next task is another one: the unused warm one goes
    wait_until(lambda: not containers(engine, run_id=settings.run_id, task="nextone"))
    assert pool.close() == []
    assert containers(engine, run_id=settings.run_id) == []  # the last warm one too


def test_a_task_takes_its_warm_kernel(settings, engine, tmp_path):
    pool = KernelPool(provision_kernel, lock_dir=tmp_path / "locks")
    first = pool.take(settings, "one")
    pool.warm(settings, "two")
    (warm_box,) = wait_until(lambda: containers(engine, run_id=settings.run_id, task="two"))
    first.close()  # returns at once; the reaper removes it
    again = pool.take(settings, "one")  # task one asks again (a Reflexion attempt): a new kernel
    assert warm_box.id[:12] not in again.description
    again.close()
    second = pool.take(settings, "two")  # ... and task two still gets the one made for it
    assert warm_box.id[:12] in second.description
    result = second.execute("print(len(In) - 1, len(Out))", 30)
    assert (result.status, result.output.split()) == ("ok", ["1", "0"])
    second.close()
    assert pool.close() == []
    assert containers(engine, run_id=settings.run_id) == []


def test_a_warm_kernel_that_died_while_it_waited_is_made_anew(settings, engine, tmp_path):
    pool = KernelPool(provision_kernel, lock_dir=tmp_path / "locks")
    pool.warm(settings, "next")
    assert pool._warm is not None
    assert pool._warm.future.result(timeout=120) is not None  # made: its kernel answered
    (warm_box,) = containers(engine, run_id=settings.run_id, task="next")
    warm_box.kill()  # the engine's OOM killer, a `docker kill` by someone
    kernel = pool.take(settings, "next")
    assert warm_box.id[:12] not in kernel.description
    result = kernel.execute("print(1 + 1)", 30)
    assert (result.status, result.output.strip()) == ("ok", "2")
    kernel.close()
    assert pool.close() == []
    assert containers(engine, run_id=settings.run_id) == []


def test_a_warm_kernel_needs_a_free_slot(settings, engine, tmp_path):
    """--super-max-containers 1: the task's kernel holds the only slot, so nothing is made ahead;
    the next task still gets its kernel once the first one's removal has freed the slot."""
    pool = KernelPool(provision_kernel, lock_dir=tmp_path / "locks", max_containers=1)
    first = pool.take(settings, "one")
    pool.warm(settings, "two")
    time.sleep(3)
    assert [c.labels[LABEL_TASK] for c in containers(engine, run_id=settings.run_id)] == ["one"]
    first.close()
    second = pool.take(settings, "two")
    assert [c.labels[LABEL_TASK] for c in containers(engine, run_id=settings.run_id)] == ["two"]
    second.close()
    assert pool.close() == []
    assert containers(engine, run_id=settings.run_id) == []


def test_without_the_pool_nothing_is_made_ahead(settings, engine, tmp_path):
    pool = KernelPool(provision_kernel, lock_dir=tmp_path / "locks", warm=False)
    kernel = pool.take(settings, "one")
    pool.warm(settings, "two")
    kernel.close()
    assert containers(engine, run_id=settings.run_id) == []
    assert pool.close() == []


# -- pure parts --------------------------------------------------------------------------------------
def _another_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, dict):
        return {**value, "https://example.org/": "/mirrors"}
    return f"{value}-other"  # str, or None


def test_every_settings_field_is_part_of_the_key():
    base = KernelSettings()
    assert kernel_key(base, "t") == kernel_key(KernelSettings(), "t")
    assert kernel_key(base, "t") != kernel_key(base, "u")
    for f in dataclasses.fields(KernelSettings):
        changed = dataclasses.replace(base, **{f.name: _another_value(getattr(base, f.name))})
        assert kernel_key(changed, "t") != kernel_key(base, "t"), f.name


class UnremovableKernel:
    """A kernel whose removal fails the way it does when the engine has gone away."""

    description = "docker container super-gone-main-abc123 (abc123abc123)"

    def close(self) -> None:
        raise ConnectionError("the engine went away")


def test_failed_removals_are_reported_and_free_their_slot(tmp_path):
    lock_dir = tmp_path / "locks"
    slot = slots.take_slot(lock_dir, 1)
    assert slot is not None and slots.take_slot(lock_dir, 1, wait=False) is None
    reaper = Reaper()
    PooledKernel(UnremovableKernel(), slot, reaper).close()  # type: ignore[arg-type]
    reaper.wait()
    assert reaper.failures() == [
        f"{UnremovableKernel.description}: ConnectionError: the engine went away"
    ]
    assert reaper.failures() == []  # reported once
    again = slots.take_slot(lock_dir, 1, wait=False)
    assert again is not None
    again.release()


def test_a_task_waiting_for_a_slot_comes_before_a_kernel_made_ahead(tmp_path):
    """A freed slot goes to the task that waits for it, even between two of its polls: a kernel
    made ahead (wait=False) stands back while anyone waits, and a waiter that died counts for
    nothing."""
    lock_dir = tmp_path / "locks"
    held = slots.take_slot(lock_dir, 1)
    assert held is not None
    taken: list[slots.Slot | None] = []
    waiter = threading.Thread(
        target=lambda: taken.append(slots.take_slot(lock_dir, 1, poll_s=3)), daemon=True
    )
    waiter.start()
    wait_until(lambda: slots.someone_waits(lock_dir), timeout=10)
    held.release()  # free now, but the waiter polls again only in up to 3 s
    ahead = slots.take_slot(lock_dir, 1, wait=False)
    if ahead is not None:
        ahead.release()  # so that the waiter is not left waiting when this fails
    assert ahead is None, "a kernel made ahead took the slot a task waits for"
    waiter.join(timeout=10)
    (slot,) = taken
    assert slot is not None and not slots.someone_waits(lock_dir)
    slot.release()

    (lock_dir / "waiting-1-1.lock").touch()  # left by a killed process: its lock died with it
    ahead = slots.take_slot(lock_dir, 1, wait=False)
    assert ahead is not None
    ahead.release()


class _ThirdPartyPlainBackend:
    """A backend of another package that says nothing about warming (its methods unused here)."""

    def provision(self, settings: KernelSettings, *, task_id: str) -> Any:
        raise NotImplementedError("only its class is inspected")

    def cleanup_run(self, settings: KernelSettings, run_id: str) -> list[str]:
        return []

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        return []


class _ThirdPartyWarmBackend(_ThirdPartyPlainBackend):
    """A backend of another package that opts in to kernels made ahead."""

    warm_pool = True


@pytest.mark.parametrize(
    ("spec", "warm"),
    [
        ("docker", True),
        ("local", False),
        ("tests.test_pool:_ThirdPartyWarmBackend", True),
        ("tests.test_pool:_ThirdPartyPlainBackend", False),
    ],
)
def test_warming_is_the_backends_declaration(spec: str, warm: bool) -> None:
    """The pool warms kernels for a backend that declares `warm_pool = True` (found through the
    registry, as the plugin does), never by the backend's name: a third-party one can opt in."""
    from pytest_super.kernels import kernel_backend_class
    from pytest_super.kernels.base import warms_ahead

    assert warms_ahead(kernel_backend_class(spec)) is warm
