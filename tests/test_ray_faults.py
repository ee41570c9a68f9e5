"""Faults of a Ray cluster under a `--super-executor=ray` run (issue 32): a worker node cut off the
network, a worker whose raylet hangs, a worker's Docker engine killed, Ctrl-C with tasks on two
nodes, a SIGKILLed controller and Ray worker, the run's Ray driver ended at once (its own process,
executors/ray/driver.py), and the head killed. Each on the session's one
cluster (tests/support/ray_fixtures.py: a head and two worker nodes, each with its own engine, in
a loopback-only network namespace), each put back as it was before the test ends; the head's
death comes last in the module (`restart_head` starts a whole new cluster on the same engines).

Each test prints the time the controller took to react (the figures docs/cluster.md quotes),
checks that no result was lost or recorded twice, that nothing of the run is left on any engine
or in any node's temporary folder (within 2 minutes, with no command), and that pytest never
ended in an INTERNALERROR.

The cut-off node (`RayTestCluster.partition`): all nodes share one namespace, so the cut is by
port: every TCP packet to or from node 1's ports (its node manager, object manager, agents and
Ray workers) is dropped, both ways. The head then cannot reach the node's raylet (its health
checks time out, as across a dead link) and nobody reaches its workers; the node's own calls out
to the head (from ports of the kernel's ephemeral range) still leave, which a real cut would stop
too, but Ray declares the node dead by the head's checks alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import threading
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors

from pytest_super.executors.ray.nodefiles import NODE_FOLDER_PREFIX, OWNER_FILE
from pytest_super.kernels.docker.engine import LABEL_RUN
from pytest_super.process_identity import Holder
from tests.support.projects import make_project, sleep_then_answer, task_yaml, wait_for
from tests.support.ray_cluster import _processes, ray_declared_dead, stat_fields
from tests.support.ray_fixtures import CLUSTER_TESTS, ClusterRun

pytestmark = CLUSTER_TESTS

#: seconds after a run within which nothing of it may be left on an engine or in a node's folder
LEFT_WITHIN_S = 120


# -- what a test reads ---------------------------------------------------------------------------
def _run_dir(project: Path) -> Path | None:
    reports = project / "reports"
    dirs = sorted(p for p in reports.iterdir() if p.is_dir()) if reports.is_dir() else []
    return dirs[-1] if dirs else None


def _records(project: Path) -> list[dict[str, Any]]:
    run_dir = _run_dir(project)
    path = run_dir / "results.jsonl" if run_dir else None
    if path is None or not path.exists():
        return []
    with contextlib.suppress(json.JSONDecodeError):
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return []


def _engine_containers(cluster: Any, i: int, run_id: str | None = None) -> list[str]:
    """Task containers (of run `run_id`, else of any run) on node i's engine, if it answers."""
    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN
    with contextlib.suppress(docker.errors.DockerException):
        client = docker.DockerClient(base_url=cluster.engines[i], timeout=20)
        with contextlib.closing(client):
            found = client.containers.list(all=True, filters={"label": label})
            return [c.name for c in found]
    return []


#: the node's record of trusted images (kernels/docker/trust.py): made by the first run on a fresh
#: cluster and kept across runs, the node's and no run's (a test that runs first on the cluster
#: sees it appear)
NODE_RECORD = "/run/pytest-super/locks/trusted-images"


def _left(cluster: Any, run_id: str, files_before: list[set[str]]) -> list[str]:
    """What of run `run_id` is left: its containers on every engine, and what its tasks made
    in a node's temporary folder (task folders, kernel folders) that was not there before."""
    left = []
    for i in range(cluster.nodes):
        left += [f"node {i}: container {n}" for n in _engine_containers(cluster, i, run_id)]
        made = set(cluster.node_files(i)) - files_before[i]
        left += [f"node {i}: {f}" for f in sorted(made) if not f.endswith(NODE_RECORD)]
    return left


def _nothing_left(cluster: Any, run_id: str, files_before: list[set[str]]) -> float:
    """Wait (at most LEFT_WITHIN_S) until nothing of the run is left; the seconds it took."""
    started = time.monotonic()
    deadline = started + LEFT_WITHIN_S
    while (left := _left(cluster, run_id, files_before)) and time.monotonic() < deadline:
        time.sleep(2)
    assert not left, f"left {LEFT_WITHIN_S} s after the run: {left}"
    return time.monotonic() - started


def _files(cluster: Any) -> list[set[str]]:
    return [set(cluster.node_files(i)) for i in range(cluster.nodes)]


def _line_seen(run: ClusterRun, text: str, timeout: float) -> float:
    """Wait for `text` in the run's output; the monotonic time it was first seen."""
    wait_for(lambda: text in run.output(), timeout, f"{text!r} in the run's output", poll=0.2)
    return time.monotonic()


def _sleepers(root: Path, count: int, seconds: float) -> Path:
    return make_project(
        root,
        {
            f"expert/t{i:02d}": task_yaml(f"t{i:02d}", sleep_then_answer(seconds))
            for i in range(count)
        },
    )


def _on_node(cluster: Any, i: int, count: int, timeout: float = 240) -> str:
    """Wait until node i's engine runs `count` task containers; the run id they carry."""
    client = docker.DockerClient(base_url=cluster.engines[i])
    with contextlib.closing(client):
        found = wait_for(
            lambda: (
                len(running := client.containers.list(filters={"label": LABEL_RUN})) >= count
                and running
            ),
            timeout,
            f"{count} task container(s) running on node {i}",
        )
        return str(found[0].labels[LABEL_RUN])


def _dead_at(
    cluster: Any, node_id: str, timeout: float, seen: dict[str, float]
) -> threading.Thread:
    """A thread that records in `seen["dead"]` when the head first reports node `node_id`
    dead (one driver polling ray.nodes() every 0.2 s)."""

    def watch() -> None:
        with contextlib.suppress(Exception):
            nodes = cluster._poll_nodes(want=[], dead=node_id, wait=timeout)
            if any(n["NodeID"] == node_id and not n["Alive"] for n in nodes):
                seen["dead"] = time.monotonic()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _clean_exit(out: str) -> None:
    assert "INTERNALERROR" not in out, out[-5000:]


#: what the controller's guardian says when it ended without ending its run (guardian.py)
GUARDIAN_SPOKE = "ended without ending the run"


def _driver_of(controller_pid: int) -> int:
    """The pid of a controller's Ray driver process (executors/ray/driver.py)."""
    found = [
        pid
        for pid, cmdline, _ in _processes()
        if "pytest_super.executors.ray.driver" in cmdline
        and stat_fields(pid)[1:2] == [str(controller_pid)]
    ]
    assert len(found) == 1, found
    return found[0]


def _process_ended(pid: int) -> bool:
    """Process `pid` ended (gone, or dead and not yet reaped by its new parent)."""
    return stat_fields(pid)[:1] in ([], ["Z"], ["X"])


# -- a worker node lost ------------------------------------------------------------------------
def test_a_worker_cut_off_the_network_has_its_tasks_run_again_on_the_other_node(cluster, tmp_path):
    project = _sleepers(tmp_path, 4, 25)
    files = _files(cluster)
    run = ClusterRun(
        cluster, project, "--super-agent=gold", "--super-executor=ray", "--super-retries=1", "-q"
    )
    node_id = cluster.node_ids()[cluster.node_resource(1)]
    run_id = _on_node(cluster, 1, 2)
    seen: dict[str, float] = {}
    cut = time.monotonic()
    cluster.partition(1)
    try:
        watcher = _dead_at(cluster, node_id, 180, seen)
        noticed = _line_seen(run, " is dead (Ray declared it so)", 240)
        code = run.wait(420)
        out = run.output()
        watcher.join(timeout=60)
    finally:
        cluster.heal(1)
    records = _records(project)
    assert sorted(r["task_id"] for r in records) == [f"t{i:02d}" for i in range(4)], out[-4000:]
    assert code == 0 and all(r["outcome"] == "passed" for r in records), out[-4000:]
    retried = [r for r in records if r.get("retried_after")]
    assert len(retried) == 2, records  # the two tasks node 1 ran, run again on node 0
    assert all("NodeLost" in r["retried_after"] and "died" in r["retried_after"] for r in retried)
    assert "dead" in seen, "the head never reported node 1 dead"
    after_dead = noticed - seen["dead"]
    print(
        f"cut off: Ray declared node 1 dead {seen['dead'] - cut:.1f} s after the cut (seen by a "
        f"driver polling every 0.2 s); the controller said so and sent its tasks to node 0 "
        f"{noticed - cut:.1f} s after the cut"
    )
    assert after_dead < 60
    _clean_exit(out)
    took = _nothing_left(cluster, run_id, files)
    print(f"cut off: nothing of the run left {took:.1f} s after its end")


def test_a_worker_whose_raylet_hangs_has_its_tasks_reported_as_lost_naming_it(cluster, tmp_path):
    project = _sleepers(tmp_path, 4, 25)
    files = _files(cluster)
    run = ClusterRun(cluster, project, "--super-agent=gold", "--super-executor=ray", "-q")
    node_id = cluster.node_ids()[cluster.node_resource(1)]
    run_id = _on_node(cluster, 1, 2)
    seen: dict[str, float] = {}
    hung = time.monotonic()
    cluster.hang_node(1)
    try:
        watcher = _dead_at(cluster, node_id, 180, seen)
        noticed = _line_seen(run, " is dead (Ray declared it so)", 240)
        code = run.wait(420)
        out = run.output()
        watcher.join(timeout=60)
    finally:
        cluster.revive_node(1)
    records = _records(project)
    assert sorted(r["task_id"] for r in records) == [f"t{i:02d}" for i in range(4)], out[-4000:]
    lost = [r for r in records if r["outcome"] == "error"]
    assert len(lost) == 2 and code == 1, out[-4000:]  # node 1's two tasks; node 0's passed
    assert all(r["exit_status"] == "kernel_error" for r in lost), lost
    lost_node = {r["node"] for r in lost}
    assert len(lost_node) == 1 and node_id[:12] in lost_node.pop(), lost
    assert out.count("died while it ran the task") >= 2, out[-4000:]
    assert "--super-retries N" in out
    assert "dead" in seen, "the head never reported node 1 dead"
    print(
        f"raylet hung: Ray declared node 1 dead {seen['dead'] - hung:.1f} s after SIGSTOP; the "
        f"controller reported its tasks {noticed - hung:.1f} s after SIGSTOP"
    )
    assert noticed - seen["dead"] < 60
    _clean_exit(out)
    took = _nothing_left(cluster, run_id, files)
    print(f"raylet hung: nothing of the run left {took:.1f} s after its end")


def test_a_worker_whose_engine_dies_is_left_out_and_its_tasks_run_on_the_other_node(
    cluster, tmp_path
):
    project = _sleepers(tmp_path, 4, 15)
    files = _files(cluster)
    run = ClusterRun(
        cluster, project, "--super-agent=gold", "--super-executor=ray", "--super-retries=1", "-q"
    )
    run_id = _on_node(cluster, 1, 2)
    killed = time.monotonic()
    cluster.kill_engine(1)
    try:
        noticed = _line_seen(run, "takes no more tasks of this run", 240)
        code = run.wait(420)
        out = run.output()
    finally:
        cluster.restart_engine(1)
    records = _records(project)
    assert sorted(r["task_id"] for r in records) == [f"t{i:02d}" for i in range(4)], out[-4000:]
    assert code == 0 and all(r["outcome"] == "passed" for r in records), out[-4000:]
    node_1 = cluster.node_ids()[cluster.node_resource(1)][:12]
    assert not [r for r in records if node_1 in r["node"]], records  # all passed elsewhere
    retried = [r for r in records if r.get("retried_after")]
    assert len(retried) == 2 and all("engine" in r["retried_after"].lower() for r in retried)
    summary = [ln for ln in out.splitlines() if "took no more tasks of this run" in ln]
    assert len(summary) == 1 and node_1 in summary[0] and "engine failed 2" in summary[0], out
    print(f"engine killed: the controller left node 1 out {noticed - killed:.1f} s after it")
    _clean_exit(out)
    took = _nothing_left(cluster, run_id, files)
    print(f"engine killed: nothing of the run left {took:.1f} s after its end")


# -- the controller stopped ----------------------------------------------------------------------
#: the slow tasks' own sleep: Ctrl-C must end the run long before it (how fast: bench_ctrl_c.py)
CTRL_C_SLEEP_S = 300


def test_ctrl_c_with_tasks_on_two_nodes_ends_the_run_and_leaves_nothing(cluster, tmp_path):
    tasks = {"expert/quick": task_yaml("quick", sleep_then_answer(0))}
    tasks.update(
        {
            f"expert/slow{i}": task_yaml(f"slow{i}", sleep_then_answer(CTRL_C_SLEEP_S))
            for i in range(4)
        }
    )
    project = make_project(tmp_path, tasks)
    files = _files(cluster)
    run = ClusterRun(cluster, project, "--super-agent=gold", "--super-executor=ray", "-q")
    wait_for(lambda: _records(project), 240, "the quick task's result")
    run_id = _on_node(cluster, 0, 2)
    _on_node(cluster, 1, 2)
    driver = _driver_of(run.proc.pid)
    started = time.monotonic()
    os.kill(run.proc.pid, signal.SIGINT)
    code = run.wait(CTRL_C_SLEEP_S / 2)
    took = time.monotonic() - started
    out = run.output()
    left_at_end = [n for i in range(cluster.nodes) for n in _engine_containers(cluster, i, run_id)]
    wait_for(lambda: _process_ended(driver), 30, "the run's Ray driver to end after the run")
    print(f"Ctrl-C with tasks on two nodes: the run ended {took:.2f} s after it")
    assert code == 2, out[-4000:]
    assert [(r["task_id"], r["outcome"]) for r in _records(project)] == [("quick", "passed")]
    assert left_at_end == [], out[-3000:]
    _clean_exit(out)
    assert GUARDIAN_SPOKE not in out and "guardian.py" not in out, out[-3000:]  # silent
    _nothing_left(cluster, run_id, files)
    # Ended, within half the tasks' own sleep (run.wait above): issue 32's 2 s is a figure of
    # benchmarks/bench_ctrl_c.py (against removing the same containers directly, in the same
    # run), not a bound here: under load this test once took 1.92-2.34 s and bent to an xfail.


def _ray_worker_of(cluster: Any, i: int, run_id: str) -> tuple[int, str]:
    """(pid, command line) of a Ray worker on node i that runs a task of run `run_id`: the
    holder its task folder's owner record names (`nodefiles.task_folder`). Found by the worker's
    name alone ("pytest-super t00"), the process could be one of an earlier run's tasks of the
    same names, or the worker's fork that becomes its watchdog: the probable cause of a miss in a
    fresh-clone run (the SIGKILL reached no task)."""
    pids = set()
    for folder in cluster.node_tmp(i).glob(f"{NODE_FOLDER_PREFIX}{run_id}-*"):
        with contextlib.suppress(OSError, ValueError):
            holder = Holder.from_labels(json.loads((folder / OWNER_FILE).read_text()))
            if holder is not None:
                pids.add(holder.pid)
    alive = {pid: cmdline for pid, cmdline, _ in _processes() if pid in pids}
    assert alive, f"no Ray worker on node {i} with a task of run {run_id}: {cluster.node_files(i)}"
    pid = min(alive)
    return pid, alive[pid]


def test_a_sigkilled_ray_worker_s_task_runs_again_and_its_container_goes(cluster, tmp_path):
    project = _sleepers(tmp_path, 2, 20)
    files = _files(cluster)
    run = ClusterRun(
        cluster, project, "--super-agent=gold", "--super-executor=ray", "--super-retries=1", "-q"
    )
    run_id = _on_node(cluster, 0, 1)
    worker, cmdline = _ray_worker_of(cluster, 0, run_id)
    os.kill(worker, signal.SIGKILL)
    killed = time.monotonic()
    print(f"Ray worker SIGKILLed: pid {worker} ({cmdline.strip()[:80]})")
    code = run.wait(420)
    out = run.output()
    records = _records(project)
    assert sorted(r["task_id"] for r in records) == ["t00", "t01"], out[-4000:]
    assert code == 0 and all(r["outcome"] == "passed" for r in records), out[-4000:]
    assert [r for r in records if "NodeLost" in (r.get("retried_after") or "")], records
    _clean_exit(out)
    took = _nothing_left(cluster, run_id, files)
    print(
        f"Ray worker SIGKILLed: its run ended and nothing was left {time.monotonic() - killed:.1f} s later ({took:.1f} s after the end)"
    )


def test_a_sigkilled_controller_leaves_nothing_on_the_nodes_within_2_minutes(cluster, tmp_path):
    project = _sleepers(tmp_path, 4, 300)
    files = _files(cluster)
    run = ClusterRun(cluster, project, "--super-agent=gold", "--super-executor=ray", "-q")
    run_id = _on_node(cluster, 0, 2)
    _on_node(cluster, 1, 2)
    driver = _driver_of(run.proc.pid)
    os.killpg(run.proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    run.wait(60)
    # its guardian (a session of its own: the group's SIGKILL is not its) says what goes on
    said = _line_seen(run, "pytest-super: or remove what is left on the nodes now with:", 30)
    out = run.output()
    assert f"the controller of run {run_id} (pid {run.proc.pid}) {GUARDIAN_SPOKE}" in out, out
    assert "run what did not finish with: pytest -p no:cacheprovider --super-agent=gold" in out
    took = _nothing_left(cluster, run_id, files)
    print(
        f"controller SIGKILLed: its guardian spoke {said - killed:.1f} s after; nothing of its "
        f"run left {time.monotonic() - killed:.1f} s later"
    )
    assert took <= LEFT_WITHIN_S
    # its driver (a session of its own too) cleaned the nodes up and left: it does not stay
    wait_for(lambda: _process_ended(driver), 90, "the Ray driver of the killed controller to end")
    print(f"controller SIGKILLed: its Ray driver ended {time.monotonic() - killed:.1f} s after")


def _ended_with_what_it_had(out: str, project: Path, run_dir: Path, junit: Path) -> None:
    """A run of `_slow_tasks_running` ended by the controller itself: its message on the three
    unfinished tasks and the resume command, no node charged, the two results, summary and JUnit
    written, no INTERNALERROR."""
    assert "3 tasks of this run did not finish" in out and "--super-resume" in out, out[-5000:]
    assert "InfrastructureError" not in out, out[-5000:]  # no worker node charged
    assert GUARDIAN_SPOKE not in out, out[-5000:]  # the run was ended by the controller
    assert sorted(r["task_id"] for r in _records(project)) == ["quick0", "quick1"]
    assert (run_dir / "summary.md").is_file()
    assert "quick0" in junit.read_text()
    _clean_exit(out)


def test_the_ray_driver_ended_at_once_ends_the_run_cleanly_with_what_it_has(cluster, tmp_path):
    """Ray's C++ core may end its driver's process at once (`QuickExit`, `ci8`: exit status 1,
    no Python code runs); SIGKILL does the same. The driver runs in a process of its own: the
    controller ends the run with pytest-super's message, its results, summary and JUnit written,
    a resume command; the run's tasks, whose job Ray ends with its driver, leave nothing (each
    task's dead man's switch on its node)."""
    files = _files(cluster)
    run, project, run_dir = _slow_tasks_running(cluster, tmp_path)
    os.kill(_driver_of(run.proc.pid), signal.SIGKILL)
    killed = time.monotonic()
    code = run.wait(120)
    took = time.monotonic() - killed
    out = run.output()
    print(f"the Ray driver SIGKILLed: the run ended {took:.2f} s after (exit status {code})")
    assert code == 2, out[-5000:]
    assert "the run's Ray driver (process" in out and "ended unasked" in out, out[-5000:]
    _ended_with_what_it_had(out, project, run_dir, tmp_path / "junit.xml")
    left = _nothing_left(cluster, run_dir.name, files)
    print(f"the Ray driver SIGKILLed: nothing of the run left {left:.1f} s after the run's end")


# -- the head lost (last: it starts a new cluster) -----------------------------------------------
def _slow_tasks_running(cluster: Any, root: Path) -> tuple[ClusterRun, Path, Path]:
    """A run of two quick tasks (their results written) and three slow ones (running on the
    nodes): its controller, project and run folder."""
    tasks = {f"expert/quick{i}": task_yaml(f"quick{i}", sleep_then_answer(0)) for i in range(2)}
    tasks.update(
        {f"expert/slow{i}": task_yaml(f"slow{i}", sleep_then_answer(300)) for i in range(3)}
    )
    project = make_project(root, tasks)
    run = ClusterRun(
        cluster,
        project,
        "--super-agent=gold",
        "--super-executor=ray",
        "-q",
        f"--junitxml={root / 'junit.xml'}",
    )
    wait_for(lambda: len(_records(project)) == 2, 300, "the two quick tasks' results")
    run_dir = _run_dir(project)
    assert run_dir is not None
    wait_for(
        lambda: sum(len(_engine_containers(cluster, i, run_dir.name)) for i in range(2)) >= 3,
        240,
        "the three slow tasks running on the nodes",
    )
    return run, project, run_dir


def test_the_controllers_own_node_declared_dead_ends_the_run_cleanly_charging_no_node(
    cluster, tmp_path
):
    """The head's raylet, to which the controller's Ray driver is attached, stalls until the
    head declares its node dead (an overloaded head machine: `ci8`), then runs again. Ray ends
    the run's job, and with it the tasks on the two healthy worker nodes: the run ends with
    pytest-super's message on its own node (not three infrastructure errors blaming the worker
    nodes, nor Ray's exit), its results written, a resume command, nothing left."""
    files = _files(cluster)
    try:
        run, project, run_dir = _slow_tasks_running(cluster, tmp_path)
        head = cluster.node_ids()["head"]
        declared = cluster.stall_head_raylet()
        resumed = time.monotonic()
        # what the head-kill test below reads to tell such a loss before its own fault
        assert cluster.head_declared_dead(head), cluster.head_log_lines("health check")
        code = run.wait(120)
        took = time.monotonic() - resumed
        out = run.output()
    finally:
        cluster.restart_head()
    assert ray_declared_dead(out), out[-5000:]  # and the driver's word for it, read there too
    print(
        f"the controller's own node declared dead {declared:.1f} s after its raylet stalled: "
        f"the run ended {took:.1f} s after the raylet ran again (exit status {code})"
    )
    assert code == 2, out[-5000:]  # interrupted, with pytest-super's own message
    assert "the Ray node this controller is attached to" in out, out[-5000:]
    _ended_with_what_it_had(out, project, run_dir, tmp_path / "junit.xml")
    left = _nothing_left(cluster, run_dir.name, files)
    print(f"the controller's own node lost: nothing of the run left {left:.1f} s after its end")


#: what of the head's logs tells how it saw its nodes (health checks, deaths, failures)
_HEAD_LOG_WORDS = ("dead", "ealth", "ail", "SIG", "FATAL", "Check")
#: the controller's word for its own Ray node declared dead by the head (`HeadChecks`)
OWN_NODE_DEAD = "was declared dead by the cluster's head"
#: runs the head-kill test makes until one has the head's kill as its only fault
_HEAD_KILL_ATTEMPTS = 3


def test_the_head_killed_mid_run_ends_the_run_cleanly_with_what_it_has(cluster, tmp_path):
    """... and the command it prints runs the rest once the cluster is back: the three tasks
    that did not finish (made quick first: a test cannot wait their 300 s), not the two that
    did (carried over from the first run).

    The fault is the head's loss. In 2 of 6 fresh clones' make test, the head's raylet, the one
    the controller's Ray driver is attached to, was declared dead by the head's own GCS 12-15 s
    into the run, before the test killed anything, and Ray ended the controller (then the
    driver's process too) with exit status 1 and no word of ours (docs/cluster.md: the
    controller's local raylet; the controller now ends such a run itself, when it sees its node
    dead first or when Ray ends its driver's process: the tests above). In CI of 4c95659 that
    loss came as the test killed the head: the controller ended 0.1 s after the kill, for its
    node declared dead (`OWN_NODE_DEAD`, which only a head that still answers can say). In CI of
    9f1efda it came 19 s into the run, and Ray ended the driver's process at once: the
    controller's "ended unasked", the same loss, which the killed head's GCS log tells (only a
    GCS still running writes it: `head_declared_dead`). In CI of 33ce976 the driver had printed
    Ray's own word for it 18 s into the run ("has been marked dead because the detector has
    missed too many heartbeats": `RAY_MARKED_DEAD`, which only a running GCS sends) and ended
    as the head was killed, while the killed GCS's log held no such line for the head's node
    (why not is not known: a line not yet written out at the SIGKILL, or another node; either
    way a node was lost before the kill). The fault under test was then never made, or not what ended
    the run: the test says so, shows the head's logs, and makes it again on a new head, up to
    `_HEAD_KILL_ATTEMPTS` times in all; a loss of that kind on every attempt fails the test."""
    files = _files(cluster)
    for attempt in range(1, _HEAD_KILL_ATTEMPTS + 1):
        root = tmp_path / f"try{attempt}"
        root.mkdir()
        run, project, run_dir = _slow_tasks_running(cluster, root)
        # how the head saw its nodes before it went
        before = cluster.head_log_lines(*_HEAD_LOG_WORDS)
        head = cluster.node_ids().get("head")
        if run.proc.poll() is None and head is not None:
            cluster.kill_head()
            killed = time.monotonic()
            try:
                code = run.wait(180)
                took = time.monotonic() - killed
                out = run.output()
                # the killed head's GCS log, read before a new head replaces it
                declared = cluster.head_declared_dead(head)
            finally:
                cluster.restart_head()
            declared = "\n".join(filter(None, [declared, *ray_declared_dead(out)]))
            if OWN_NODE_DEAD not in out and not declared:
                break
            spoiled = f"a node was declared dead before the head's kill ({code})"
            before += f"\n{declared}"
        else:
            spoiled = (
                f"the controller ended ({run.proc.returncode}) or the head's node was no longer "
                f"alive ({head}) before the head's kill"
            )
            cluster.restart_head()
        early = f"{run.output()[-3000:]}\nthe head's logs before its kill:\n{before}"
        print(f"try {attempt}: {spoiled}:\n{early}")
        assert attempt < _HEAD_KILL_ATTEMPTS, f"every time, {spoiled}:\n{early}"
        _nothing_left(cluster, run_dir.name, files)
    run_id = run_dir.name
    print(f"head killed: the controller ended by itself {took:.1f} s after it (exit status {code})")
    assert code == 2, f"{out[-5000:]}\nthe head's logs before its kill:\n{before}"  # interrupted
    assert took < 90, out[-3000:]
    assert "stopped answering" in out and "3 tasks of this run did not finish" in out, out[-5000:]
    assert "--super-resume" in out and "pytest-super cleanup --executor ray" in out
    assert sorted(r["task_id"] for r in _records(project)) == ["quick0", "quick1"]
    assert (run_dir / "summary.md").is_file()
    assert "quick0" in (root / "junit.xml").read_text()
    _clean_exit(out)
    left = _nothing_left(cluster, run_id, files)
    print(f"head killed: nothing of the run left {left:.1f} s after its end")
    (command,) = [  # its own line (pytest's "! Interrupted: ... !" says it again)
        ln.split("run them with: ", 1)[1]
        for ln in out.splitlines()
        if ln.startswith("pytest-super:") and "run them with: " in ln
    ]
    argv = shlex.split(command)
    assert argv[0] == "pytest" and argv[-1] == "--super-resume", command
    for i in range(3):
        (project / "tasks" / "expert" / f"slow{i}.yaml").write_text(
            task_yaml(f"slow{i}", sleep_then_answer(0))
        )
    resumed = ClusterRun(cluster, project, *argv[1:])
    assert resumed.wait(300) == 0, resumed.output()[-5000:]
    records = {r["task_id"]: r for r in _records(project)}
    assert sorted(records) == ["quick0", "quick1", "slow0", "slow1", "slow2"], records
    assert all(r["outcome"] == "passed" for r in records.values()), records
    carried = sorted(t for t, r in records.items() if r.get("resumed_from") == run_id)
    assert carried == ["quick0", "quick1"], records
