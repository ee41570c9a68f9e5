"""Nothing outlives its owner (issue 32 item 5): a kernel container or lease whose owner is gone
removes itself within 2 minutes, with no later run and no command (the engine's reaper,
pytest_super/kernels/docker/reaper.py, honouring the leases of lease.py).

The SIGKILL scenarios run side by side (one module fixture starts them all and a thread watches
the engine), so the module waits about one TTL, not one per scenario. Each scenario's removal is
credited to the reaper only when the reaper's own log names what it removed. They run on an
engine of the module's own (tests/support/second_engine.py): on the shared engine another
session's start-up cleanup could remove a dead run's containers first. The reaper's idle exit
needs an engine with nothing of ours on it: the same one, before the scenarios start."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from pytest_super import process_identity
from pytest_super.kernels import provision_kernel
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker import cleanup, lease
from pytest_super.kernels.docker import engine as engine_module
from pytest_super.kernels.docker.cleanup import (
    OWNER_FILE,
    cleanup_containers,
    make_host_folder,
    maker_entry,
)
from pytest_super.kernels.docker.engine import LABEL, LABEL_RUN, engine_identity
from pytest_super.kernels.docker.lease import LABEL_HOLDER, LABEL_LEASE, TTL_S, Lease, engine_time
from pytest_super.kernels.docker.reaper import LABEL_REAPER, ensure_reaper, reaper_name
from pytest_super.kernels.inside import reaper as inside
from tests.support.projects import (
    FAIL,
    PytestRun,
    containers,
    make_project,
    run_dirs,
    sleep_then_answer,
    task_yaml,
    wait_for,
)
from tests.support.second_engine import SECOND_HOST

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: the requirement: removed within 2 minutes of the owner's death
LIMIT_S = 120.0
#: long enough that no task ends by itself while the test watches
LONG = sleep_then_answer(900)


def test_the_reaper_reads_the_labels_and_names_the_harness_writes() -> None:
    """The reaper runs with the image's Python and imports nothing of ours: its copies of the
    labels must be the harness's."""
    assert inside.LABEL == engine_module.LABEL
    assert inside.LABEL_LEASE == lease.LABEL_LEASE
    assert inside.LABEL_HOLDER == lease.LABEL_HOLDER
    assert inside.LABEL_SWITCH == lease.LABEL_SWITCH
    assert inside.LABEL_HOLDER_PID == process_identity.LABEL_HOLDER_PID
    assert inside.LABEL_HOLDER_START == process_identity.LABEL_HOLDER_START
    assert inside.LABEL_HOLDER_PID_NS == process_identity.LABEL_HOLDER_PID_NS
    assert inside.LABEL_HOLDER_BOOT == process_identity.LABEL_HOLDER_BOOT
    assert inside.LEASE_FILE == lease.LEASE_FILE
    assert inside.KEPT_SUFFIX == cleanup.KEPT_SUFFIX
    assert inside.DEFAULT_TTL_S == TTL_S
    # the worst case (renewed just before the death, judged by the clock) stays under 2 minutes
    assert TTL_S + 2 * inside.SWEEP_S + 10 <= LIMIT_S


# -- the reaper itself -----------------------------------------------------------------------------
def test_the_reaper_leaves_once_nothing_of_ours_is_left(second_engine, image) -> None:
    """On an engine of its own (tests/support/second_engine.py), with a 3 s idle period: it
    stays while a task container is there, and leaves (auto-removed) once there is none."""
    before = _engine_seen(second_engine)  # the failure's message says what was there before
    _remove_reapers(second_engine)  # one left running keeps its own idle period, not ours
    box = second_engine.containers.create(image, ["true"], labels={"pytest-super": "1"})
    try:
        name = ensure_reaper(second_engine, SECOND_HOST, idle_s=3)
        assert name == reaper_name()
        reaper = second_engine.containers.get(name)
        assert reaper.status == "running"
        assert "PYTEST_SUPER_REAPER_IDLE_S=3" in reaper.attrs["Config"]["Env"], reaper.attrs
        time.sleep(3 * (3 + inside.SWEEP_S))
        assert second_engine.containers.get(name).status == "running", "it left too early"
    finally:
        box.remove(force=True)
    started = time.monotonic()
    _wait_until_the_reaper_leaves(second_engine, f"before the test: {before}")
    print(f"the idle reaper left {time.monotonic() - started:.1f} s after the last task's removal")


def _wait_until_the_reaper_leaves(client: docker.DockerClient, before: str = "") -> None:
    """It leaves at a sweep after its 3 s idle period (3-8 s on a quiet machine); an idle reaper
    that stays is what this rules out, so the bound is the wait, no band near the figure (issue
    42: the machine's load decides how soon the engine removes the container)."""

    def gone() -> bool:
        try:
            client.containers.get(reaper_name())
        except docker.errors.NotFound:
            return True
        return False

    try:
        wait_for(gone, 60, "the idle reaper to leave", poll=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; on the engine: {_engine_seen(client)}; {before}") from None


def test_the_reaper_leaves_beside_a_dead_container_of_ours(second_engine, image) -> None:
    """A container whose removal failed ("dead": CI left a lease so, its root filesystem busy,
    on a kept data root) runs nothing again: it does not keep the reaper. The engine's removal
    is made to fail here by a file it may not delete (immutable) in the container's own layer."""
    box = second_engine.containers.run(image, ["true"], labels={"pytest-super": "1"}, detach=True)
    box.wait(timeout=60)
    pinned = Path(box.attrs["GraphDriver"]["Data"]["UpperDir"], "pinned")
    pinned.write_text("")
    subprocess.run(["chattr", "+i", str(pinned)], check=True)
    try:
        with pytest.raises(docker.errors.APIError):
            box.remove(force=True)
        box.reload()
        assert box.status == "dead", box.status
        _remove_reapers(second_engine)
        assert ensure_reaper(second_engine, SECOND_HOST, idle_s=3) == reaper_name()
        _wait_until_the_reaper_leaves(second_engine)
    finally:
        subprocess.run(["chattr", "-i", str(pinned)], check=False)
        with contextlib.suppress(docker.errors.NotFound):
            box.remove(force=True)


def _remove_reapers(client: docker.DockerClient) -> None:
    for old in client.containers.list(all=True, filters={"label": LABEL_REAPER}):
        with contextlib.suppress(docker.errors.NotFound):
            old.remove(force=True)


def test_a_released_lease_starts_no_reaper_and_takes_no_lease_again(second_engine, image) -> None:
    """A beat of the renewal under way when the lease is released (CI saw a reaper of the
    default idle period on an engine where none was asked for): whatever of it comes after the
    release starts no reaper and makes no lease container, and `release` waits for it."""
    _remove_reapers(second_engine)
    held = Lease(second_engine, image, address=SECOND_HOST, switch=True)
    assert second_engine.containers.get(reaper_name()).status == "running"
    _remove_reapers(second_engine)
    held.release()
    assert not held._heartbeat.beating(), "release returned with a beat under way"
    held.ensure_reaper()  # what a beat that renewed just before the release does next
    held._renew_once()  # and a whole beat: its lease gone, it must not take it again
    with pytest.raises(docker.errors.NotFound):
        second_engine.containers.get(reaper_name())
    with pytest.raises(docker.errors.NotFound):
        second_engine.containers.get(held.name)


def _engine_seen(client: docker.DockerClient) -> str:
    """What a reaper that stays counts as busy, and the reaper itself (its idle period, its
    log): a failure's message."""
    lines = []
    for box in client.containers.list(all=True, ignore_removed=True):
        labels = box.labels
        ours = labels.get(inside.LABEL) == "1" or LABEL_HOLDER in labels
        if ours or LABEL_REAPER in labels:
            env = [e for e in box.attrs["Config"]["Env"] or [] if e.startswith("PYTEST_SUPER_")]
            lines.append(f"{box.name} ({box.status}, created {box.attrs['Created']}, {env})")
            if LABEL_REAPER in labels:
                lines.append(box.logs().decode(errors="replace")[-1500:])
    return "; ".join(lines) or "nothing of ours"


@pytest.mark.timeout(60, method="signal")
def test_a_reaper_that_cannot_reach_its_engine_leaves() -> None:
    """Its socket gone or refused (a run started on a proxy's socket that was then closed: found
    on this machine, a reaper failing every sweep with "Permission denied" for 54 minutes, its
    name taken, so no lease could start one that works): it leaves after its idle period, as an
    idle one does. The reaper's own program, run here with a socket that is not there."""
    env = {
        **os.environ,
        "PYTEST_SUPER_ENGINE_SOCKET": "/nonexistent/pytest-super/engine.sock",
        "PYTEST_SUPER_REAPER_IDLE_S": "1",
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-I", inside.__file__], env=env, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    assert "sweep failed" in done.stderr and "leaving" in done.stdout, done.stdout + done.stderr
    # it left by itself (timeout=50 above: one that fails every sweep and stays never ends),
    # at a sweep after its 1 s idle period; the figure is printed, not bounded (issue 42)
    print(f"a reaper that cannot reach its engine left after {time.monotonic() - started:.1f} s")


def test_a_lease_of_another_namespace_goes_by_the_clock_within_ttl_and_a_sweep(
    second_engine, image
) -> None:
    """A holder the reaper cannot see (another PID namespace or host: a Ray worker in a
    container, a partitioned run) is judged by its lease's renewal time on the engine's clock:
    one renewed TTL_S + 5 s ago goes at the next sweep, one renewed TTL_S - 20 s ago goes about
    20 s later (not before), one renewed now stays."""
    engine = second_engine
    assert ensure_reaper(engine, SECOND_HOST) == reaper_name()
    elsewhere = process_identity.Holder(pid=1, boot_id="another-boot", pid_ns=1, start_ticks=1)
    ages = {"expired": TTL_S + 5, "due": TTL_S - 20, "fresh": 0.0}
    leases = {name: Lease(engine, image, switch=True) for name in ages}
    boxes = {}
    try:
        for name, held in leases.items():
            held.stop_renewing()
            labels = {"pytest-super": "1", LABEL_LEASE: held.id, "pytest-super.run": "dms-clock"}
            boxes[name] = engine.containers.create(image, ["true"], labels=labels).name
        written = time.monotonic()
        now = engine_time(engine)
        for name, held in leases.items():
            held.write(now - ages[name], elsewhere)
        gone: dict[str, float] = {}

        def check() -> bool:
            names = {c.name for c in engine.containers.list(all=True, ignore_removed=True)}
            for name, held in leases.items():
                if name not in gone and not {boxes[name], held.name} & names:
                    gone[name] = time.monotonic() - written
            return {"expired", "due"} <= set(gone)

        wait_for(check, 20 + 2 * inside.SWEEP_S + 60, "the dead leases to go", poll=0.5)
        print(f"by the clock: gone after {gone}")
        assert gone["expired"] <= 2 * inside.SWEEP_S + 10, gone
        assert 18 <= gone["due"] <= 20 + 2 * inside.SWEEP_S + 15, gone
        time.sleep(2 * inside.SWEEP_S)
        assert "fresh" not in gone and engine.containers.get(boxes["fresh"]), gone
    finally:
        for held in leases.values():
            held.release()
        for name in boxes.values():
            with contextlib.suppress(docker.errors.NotFound):
                engine.api.remove_container(name, force=True)


# -- the scenarios ---------------------------------------------------------------------------------
@dataclass
class Scenario:
    """One owner killed with SIGKILL: what it owned, and when it was seen gone."""

    name: str
    run: PytestRun
    lease_id: str = ""
    boxes: list[str] = field(default_factory=list)  # container names under the lease
    kept: list[str] = field(default_factory=list)  # kept containers that must stay
    killed_at: float = 0.0
    gone_after_s: float | None = None

    def owned_left(self, client: docker.DockerClient) -> list[str]:
        names = {c.name for c in client.containers.list(all=True, ignore_removed=True)}
        return sorted(names & {*self.boxes, f"pytest-super-lease-{self.lease_id}"})


def _running_box(client: docker.DockerClient, project: Path, task: str) -> Any:
    """The running container of `task` once the task runs (its trajectory exists: the pool
    makes a task's container while the task before it runs)."""

    def find() -> Any:
        dirs = run_dirs(project)
        if not dirs or not (dirs[-1] / "trajectories" / f"{task}.json").exists():
            return None
        boxes = containers(client, run_id=dirs[-1].name, task=task)
        running = [b for b in boxes if b.status == "running" and not b.name.endswith("-kept")]
        return running[0] if running else None

    return wait_for(find, 240, f"a running container of task {task!r}", poll=0.5)


def _under_lease(client: docker.DockerClient, lease_id: str) -> list[str]:
    found = client.containers.list(
        all=True, filters={"label": f"{LABEL_LEASE}={lease_id}"}, ignore_removed=True
    )
    return [c.name for c in found]


def _holder_pid(client: docker.DockerClient, lease_id: str) -> int:
    holder = client.api.inspect_container(f"pytest-super-lease-{lease_id}")
    return int(holder["Config"]["Labels"][process_identity.LABEL_HOLDER_PID])


#: the runs use the second engine: there no other session's start-up cleanup can remove a killed
#: run's containers before the reaper does (the test credits the reaper by its log)
_ON_SECOND_ENGINE = {"DOCKER_HOST": SECOND_HOST, "PYTEST_SUPER_DEAD_MAN_SWITCH": "on"}


def _start_local(root: Path) -> Scenario:
    """A run without xdist: a failing task kept with --super-keep, then a long task."""
    project = make_project(
        root / "local",
        {"expert/a_fail": task_yaml("a_fail", FAIL), "expert/b_long": task_yaml("b_long", LONG)},
    )
    args = ("tasks", "--super-agent=gold", "--super-keep")
    return Scenario("local run", PytestRun(project, *args, env=_ON_SECOND_ENGINE))


def _start_xdist(root: Path) -> Scenario:
    project = make_project(
        root / "xdist", {f"expert/x{i}": task_yaml(f"x{i}", LONG) for i in range(2)}
    )
    args = ("tasks", "--super-agent=gold", "-n", "2")
    return Scenario("xdist worker", PytestRun(project, *args, env=_ON_SECOND_ENGINE))


def _arm_local(client: docker.DockerClient, scenario: Scenario) -> None:
    """Once the long task runs (the failing one kept), kill the whole run with SIGKILL."""
    project = scenario.run.project
    box = _running_box(client, project, "b_long")
    run_id = run_dirs(project)[-1].name

    def kept_boxes() -> list[str]:
        found = containers(client, run_id=run_id, task="a_fail")
        return [c.name for c in found if c.name.endswith(cleanup.KEPT_SUFFIX)]

    kept = wait_for(kept_boxes, 60, "the failing task's kept container")
    scenario.lease_id = box.labels[LABEL_LEASE]
    assert _holder_pid(client, scenario.lease_id) == scenario.run.pid
    scenario.kept = kept
    scenario.boxes = [n for n in _under_lease(client, scenario.lease_id) if n not in kept]
    scenario.killed_at = time.monotonic()
    os.killpg(scenario.run.pid, signal.SIGKILL)
    scenario.run.proc.wait(30)


def _arm_xdist(client: docker.DockerClient, scenario: Scenario) -> str:
    """Once both workers' tasks run, kill one worker with SIGKILL; returns the other's box."""
    project = scenario.run.project
    victim, other = (_running_box(client, project, f"x{i}") for i in range(2))
    scenario.lease_id = victim.labels[LABEL_LEASE]
    assert other.labels[LABEL_LEASE] != scenario.lease_id, "both tasks under one lease"
    pid = _holder_pid(client, scenario.lease_id)
    assert pid != scenario.run.pid, "the lease is the controller's, not a worker's"
    scenario.boxes = _under_lease(client, scenario.lease_id)
    scenario.killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    return str(other.name)


def _watch(client: docker.DockerClient, scenarios: list[Scenario], stop: threading.Event) -> None:
    while not stop.is_set() and any(s.gone_after_s is None for s in scenarios):
        for s in scenarios:
            if s.gone_after_s is None and s.killed_at and not s.owned_left(client):
                s.gone_after_s = time.monotonic() - s.killed_at
        stop.wait(0.5)


@dataclass
class Killed:
    local: Scenario
    xdist: Scenario
    xdist_other_box: str
    client: docker.DockerClient


@pytest.fixture(scope="module")
def killed(
    tmp_path_factory: pytest.TempPathFactory, image: str, second_engine: docker.DockerClient
) -> Iterator[Killed]:
    client = docker.DockerClient(base_url=SECOND_HOST, timeout=120)
    root = tmp_path_factory.mktemp("dead-man-switch")
    local, xdist = _start_local(root), _start_xdist(root)
    stop = threading.Event()
    try:
        _arm_local(client, local)
        other = _arm_xdist(client, xdist)
        watcher = threading.Thread(target=_watch, args=(client, [local, xdist], stop), daemon=True)
        watcher.start()
        yield Killed(local, xdist, other, client)
    finally:
        stop.set()
        for scenario in (local, xdist):
            if scenario.run.proc.poll() is None:
                scenario.run.kill_group()
            for run_dir in run_dirs(scenario.run.project):
                cleanup_containers(client, run_id=run_dir.name)
        client.close()


def _wait_gone(killed: Killed, scenario: Scenario) -> float:
    """Seconds from the kill until the owner's containers and lease were all gone."""
    wait_for(
        lambda: scenario.gone_after_s is not None,
        LIMIT_S + 30 - (time.monotonic() - scenario.killed_at),
        f"the {scenario.name}'s containers and lease to go: {scenario.owned_left(killed.client)}",
        poll=0.5,
    )
    assert scenario.gone_after_s is not None
    print(f"{scenario.name}: gone {scenario.gone_after_s:.1f} s after SIGKILL")
    return scenario.gone_after_s


def _reaper_said(client: docker.DockerClient, names: list[str]) -> None:
    """Each of `names` is in a reaper's log as removed by it (reapers of other versions of the
    program may run beside this one's on a shared engine: every one is read)."""
    reapers = client.containers.list(filters={"label": LABEL_REAPER}, ignore_removed=True)
    log = "".join(r.logs().decode(errors="replace") for r in reapers)
    for name in names:
        assert f"removed {name} (its owner is gone)" in log, (name, log[-2000:])


def test_a_killed_local_runs_containers_and_lease_go_within_two_minutes(killed: Killed) -> None:
    seconds = _wait_gone(killed, killed.local)
    assert seconds <= LIMIT_S
    assert killed.local.boxes, "the run had no container under its lease"
    _reaper_said(killed.client, [*killed.local.boxes, killed.local.lease_id])


def test_a_killed_xdist_workers_containers_and_lease_go_the_other_workers_stay(
    killed: Killed,
) -> None:
    seconds = _wait_gone(killed, killed.xdist)
    assert seconds <= LIMIT_S
    _reaper_said(killed.client, [killed.xdist.lease_id])
    other = killed.client.containers.get(killed.xdist_other_box)
    assert other.status == "running", "the live worker's container was removed"


def test_a_kept_container_outlives_its_dead_owner_past_the_ttl(killed: Killed) -> None:
    _wait_gone(killed, killed.local)  # the reaper has judged this owner dead
    wait_for(
        lambda: time.monotonic() - killed.local.killed_at > TTL_S + 2 * inside.SWEEP_S,
        TTL_S + 60,
        "the lease's TTL to pass",
        poll=1,
    )
    [kept] = killed.local.kept
    assert killed.client.containers.get(kept).status == "running"


# -- hostile task code ----------------------------------------------------------------------------
ATTACK = r"""
import os, socket
seen = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            seen.append(open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\0', b' ').decode())
        except OSError:
            pass
print('reaper visible:', any('reaper' in c or 'dead man' in c for c in seen))
for path in ('/var/run/docker.sock', '/run/docker.sock', '/run/pytest-super-engine/docker.sock'):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        print('socket reached:', path)
    except OSError:
        pass
    s.close()
gateway = None
for line in open('/proc/net/route').read().splitlines()[1:]:
    fields = line.split()
    if fields[1] == '00000000':
        gateway = socket.inet_ntoa(bytes.fromhex(fields[2])[::-1])
for host in ('127.0.0.1', gateway):
    for port in (2375, 2376):
        if host is None:
            continue
        try:
            socket.create_connection((host, port), timeout=3).close()
            print('engine port reached:', host, port)
        except OSError:
            pass
try:
    os.kill(REAPER_PID, 9)
    print('killed', REAPER_PID)
except ProcessLookupError:
    print('no such process')
print('attack done')
"""


def test_a_task_container_can_neither_stop_the_reaper_nor_reach_the_engine(image) -> None:
    settings = KernelSettings(run_id=f"dms-attack-{time.monotonic_ns()}", image=image)
    kernel = provision_kernel(settings, task_id="attack-reaper")
    client = docker.from_env(timeout=120)
    try:
        reaper = client.api.inspect_container(reaper_name())
        assert reaper["State"]["Running"]
        code = ATTACK.replace("REAPER_PID", str(reaper["State"]["Pid"]))
        out = kernel.execute(code, timeout=60).output
        assert "attack done" in out, out
        assert "reaper visible: False" in out, out
        assert "reached" not in out, out
        assert "no such process" in out, out
        after = client.api.inspect_container(reaper_name())
        assert (
            after["State"]["Running"]
            and after["State"]["StartedAt"] == reaper["State"]["StartedAt"]
        )
        # the reaper's own limits: no network, no capability, read-only, not root
        host = after["HostConfig"]
        assert (host["NetworkMode"], host["CapDrop"], host["ReadonlyRootfs"]) == (
            "none",
            ["ALL"],
            True,
        )
        assert after["Config"]["User"] == "65534:65534"
    finally:
        kernel.close()
        cleanup_containers(client, run_id=settings.run_id)
        client.close()


#: 10,000 folders in a container's writable layer: the engine takes seconds to remove it (3.4 s
#: here, against 0.2 s for as many empty files), a removal under way that another can meet
MANY_FOLDERS = "import os\nfor i in range(10_000):\n    os.makedirs(f'/tmp/many/{i}')"


def test_a_clean_up_meeting_a_removal_under_way_waits_for_it_and_removes_the_host_folder(
    engine, image, monkeypatch
) -> None:
    """CI of e948600: a Ray driver SIGKILLed, its task's kernel folder was left on the node. The
    engine's reaper and the node's watchdog removed the task's container at once: the watchdog's
    removal met the reaper's under way (the engine's 409), took the container for removed by
    another, judged its host folder while the engine still removed it (a container there: the
    folder kept) and, its pass otherwise empty, left. Now a clean-up meeting a removal under way
    waits for the container to be gone, and its folder goes in the same pass."""
    run_id = f"dms-removing-{uuid.uuid4().hex[:10]}"
    root = Path(tempfile.mkdtemp(prefix="dms-", dir="/tmp"))  # short: the boxes' sockets
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    box = engine.containers.run(
        image,
        ["sleep", "600"],
        detach=True,
        name=f"super-removing-{uuid.uuid4().hex[:8]}",
        labels={LABEL: "1", LABEL_RUN: run_id},
    )
    other = threading.Thread(
        target=engine.api.remove_container, args=(box.id,), kwargs={"force": True}
    )
    try:
        made = box.exec_run(["python3", "-c", MANY_FOLDERS])
        assert made.exit_code == 0, made.output
        folder = Path(make_host_folder())
        owner = {"engine": engine_identity(engine.info()), "container": box.id, **maker_entry()}
        (folder / OWNER_FILE).write_text(json.dumps(owner))
        other.start()  # another's removal: the reaper's, in CI
        while engine.api.inspect_container(box.id)["State"]["Status"] != "removing":
            time.sleep(0.01)  # NotFound here: the removal ended before this test met it
        removed = cleanup_containers(engine, run_id=run_id)
        assert box.name not in removed  # the other removed it
        with pytest.raises(docker.errors.NotFound):
            engine.api.inspect_container(box.id)
        assert not folder.exists(), "the host folder of a container removed under the clean-up"
    finally:
        if other.is_alive():
            other.join(60)
        cleanup_containers(engine, run_id=run_id)
        shutil.rmtree(root, ignore_errors=True)
