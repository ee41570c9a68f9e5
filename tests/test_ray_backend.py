"""`--super-executor=ray` on a real Ray cluster of this machine (tests/support/ray_cluster.py): a
head and two worker nodes (one when the smoke test is the session's only cluster test), each node
with a Docker engine of its own, all in a network namespace
with only loopback. One pytest process (run inside that namespace) drives every task; each task
runs whole on a node, its kernel in a container of that node's engine.

Each test asserts that no container of its run is left on any node's engine."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_super import load_tasks
from pytest_super.kernels.docker.engine import LABEL_RUN
from tests.support.openai_server import FakeOpenAIServer
from tests.support.projects import (
    junit_properties,
    make_project,
    sleep_then_answer,
    task_yaml,
    wait_for,
)
from tests.support.ray_fixtures import CLUSTER_TESTS, ClusterRun

#: one xdist worker runs every cluster test (make test: --dist loadgroup), one cluster at a time
pytestmark = CLUSTER_TESTS

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-ray-test-3f9c1d7e5b2a4c68"


# -- the cluster (`cluster`: the session's, tests/support/ray_fixtures.py, 4 CPUs and 8 GiB of
# Ray's logical resources per node: two tasks of --super-cpus 2 each) and how a test drives it --


def _clean_run(engine: str, run_id: str) -> None:
    """What `pytest-super cleanup --run` does on a node: the run's containers and their host
    folders (its key files, its sockets) go."""
    from pytest_super.kernels.base import KernelSettings
    from pytest_super.kernels.docker.backend import DockerBackend

    DockerBackend().cleanup_run(KernelSettings(options={"docker_host": engine}), run_id)


def _records(report_dir: Path) -> list[dict[str, Any]]:
    (run_dir,) = [p for p in report_dir.iterdir() if p.is_dir()]
    path = run_dir / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _run_id(report_dir: Path) -> str:
    (run_dir,) = [p for p in report_dir.iterdir() if p.is_dir()]
    return run_dir.name


def _containers(cluster: Any, run_id: str) -> list[str]:
    """The run's containers on every node's engine that answers."""
    names = []
    for address in cluster.engines:
        with contextlib.suppress(docker.errors.DockerException):
            client = docker.DockerClient(base_url=address)
            found = client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
            names += [c.name for c in found]
            client.close()
    return names


# -- no cluster needed ---------------------------------------------------------------------------
ONE_TASK = {"expert/a": task_yaml("a", "print('{\"x\": 1}')")}


RAY_RUN = ("-p", "no:cacheprovider", "--super-agent=gold", "--super-executor=ray")


def _python(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """This Python in `project` (no cluster, no namespace), output captured."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_address_where_no_cluster_answers_is_a_usage_error_at_once(tmp_path):
    project = make_project(tmp_path, ONE_TASK)
    started = time.monotonic()
    done = _python(project, "-m", "pytest", *RAY_RUN, "--super-ray-address=127.0.0.1:9")
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert "--super-ray-address 127.0.0.1:9: no Ray cluster answers there" in done.stderr
    assert time.monotonic() - started < 60
    assert not (project / "reports").exists() or not any((project / "reports").iterdir())


def test_without_ray_the_error_says_how_to_install_it(tmp_path):
    project = make_project(tmp_path, ONE_TASK)
    hide_ray = (
        "import sys; sys.modules['ray'] = None; import pytest; "
        "sys.exit(pytest.main(['-p', 'no:cacheprovider', '--super-agent=gold', "
        "'--super-executor=ray']))"
    )
    done = _python(project, "-c", hide_ray)
    assert done.returncode == 4, done.stdout + done.stderr
    assert 'pip install "pytest-super[ray]"' in done.stdout + done.stderr


def test_xdist_and_ray_together_are_refused(tmp_path):
    project = make_project(tmp_path, ONE_TASK)
    done = _python(project, "-m", "pytest", *RAY_RUN, "-n", "2")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "drop -n" in done.stderr


# -- on the cluster ------------------------------------------------------------------------------
#: the demo benchmark's 22 tasks on the cluster: about 4 minutes on a quiet machine; 660 s when the
#: suite shared the CPU with four other sessions (issue 42: it failed a bound of 540 s). The bound
#: only catches a run that never ends (each task has its own deadline), so it is far from both, and
#: the test's own timeout (over the suite's 900 s) is above it.
DEMO_ON_CLUSTER_BOUND_S = 1500


@pytest.mark.timeout(DEMO_ON_CLUSTER_BOUND_S + 300)
def test_the_demo_benchmark_passes_on_the_cluster_on_both_nodes(cluster, tmp_path):
    reports = tmp_path / "reports"
    started = time.monotonic()
    run = ClusterRun(
        cluster,
        ROOT,
        "tasks",
        "--super-agent=gold",
        "--super-executor=ray",
        "-q",
        f"--super-report-dir={reports}",
        f"--junitxml={tmp_path / 'junit.xml'}",
        logs=tmp_path,
    )
    code = run.wait(DEMO_ON_CLUSTER_BOUND_S)
    took = time.monotonic() - started
    out = run.output()
    assert code == 0, out[-5000:]
    records = _records(reports)
    tasks = sorted(task.id for task in load_tasks(ROOT / "tasks"))  # SUPER's and LMR-Bench's
    assert sorted(r["task_id"] for r in records) == tasks
    assert all(r["outcome"] == "passed" for r in records)
    assert all(r.get("accuracy") in (1.0, "") for r in records if r.get("set") != "lmr"), records
    per_node: dict[str, int] = {}
    for record in records:
        node = record["node"].rsplit("/", 1)[-1]
        per_node[node] = per_node.get(node, 0) + 1
    print(f"demo on the cluster: {len(records)} tasks in {took:.1f} s, per node {per_node}")
    assert len(per_node) == 2, per_node  # both worker nodes ran tasks
    run_dir = reports / _run_id(reports)
    for record in records:  # each trajectory came back from its node into this run's folder
        assert (reports.parent / record["trajectory"]).is_file(), record["trajectory"]
    assert (run_dir / "index.html").is_file() and (run_dir / "summary.md").is_file()
    properties = junit_properties(tmp_path / "junit.xml")
    assert all("super.node" in p for p in properties.values()), properties
    assert _containers(cluster, _run_id(reports)) == []


def _sleepers(root: Path, count: int, seconds: float) -> Path:
    return make_project(
        root,
        {
            f"expert/t{i:02d}": task_yaml(f"t{i:02d}", sleep_then_answer(seconds))
            for i in range(count)
        },
    )


# make test's one cluster test (the others are long: tests/conftest.py): three tasks, the core's
# records of a local run and of a cluster run the same
@pytest.mark.cluster_smoke
def test_a_cluster_run_gives_the_files_a_local_run_gives(cluster, tmp_path, engine):
    project = _sleepers(tmp_path / "p", 3, 0)
    local = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--super-agent=gold",
            "--super-report-dir=local",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert local.returncode == 0, local.stdout[-3000:]
    remote = ClusterRun(
        cluster, project, "--super-agent=gold", "--super-executor=ray", "--super-report-dir=remote"
    )
    assert remote.wait(300) == 0, remote.output()[-3000:]
    varying = {"duration_s", "trajectory", "node"}

    def same(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(
            ({k: v for k, v in r.items() if k not in varying} for r in records),
            key=lambda r: r["task_id"],
        )

    assert same(_records(project / "local")) == same(_records(project / "remote"))
    assert all(r.get("node") for r in _records(project / "remote"))
    assert not any(r.get("node") for r in _records(project / "local"))


#: how long a cluster test waits for the state it acts in (a task's container on a node, a first
#: result): a guard against a run that never gets there, not a figure. Beside four busy processes
#: and four other sessions' tests (load 15-18 on 2 cores, issue 42's loaded run) 180 s and 240 s
#: were not enough for a 20 s task to start on the second node, nor for a 0 s task's result.
REACH_STATE_S = 600


@pytest.mark.timeout(REACH_STATE_S + 900)
def test_a_node_killed_mid_run_loses_no_result_and_leaves_no_container(cluster, tmp_path):
    project = _sleepers(tmp_path, 6, 20)
    run = ClusterRun(
        cluster, project, "--super-agent=gold", "--super-executor=ray", "--super-retries=1", "-q"
    )
    victim = 1
    client = docker.DockerClient(base_url=cluster.engines[victim])
    wait_for(
        lambda: run.proc.poll() is not None or client.containers.list(filters={"label": LABEL_RUN}),
        REACH_STATE_S,
        "a task container on the node to kill",
    )
    assert run.proc.poll() is None, run.output()[-3000:]  # a task of the run on the victim
    run_id = client.containers.list(filters={"label": LABEL_RUN})[0].labels[LABEL_RUN]
    victim_id = cluster.node_ids()[cluster.node_resource(victim)][:12]
    cluster.kill_node(victim)
    code = run.wait(420)
    out = run.output()
    records = _records(project / "reports")
    ids = [r["task_id"] for r in records]
    assert sorted(ids) == [f"t{i:02d}" for i in range(6)], out[-4000:]  # each exactly once
    assert code == 0 and all(r["outcome"] == "passed" for r in records), out[-4000:]
    retried = [r for r in records if r.get("retried_after")]
    assert retried, "the tasks on the killed node were run again"
    # the node's loss, named, whichever saw it first: Ray's error for the task (the Ray worker
    # "was lost (NodeDiedError: ...)") or the cluster's watch ("died while it ran the task");
    # this asserted "Error" in it, which only the first says (CI-like run of bc436a3: the second)
    reasons = [r["retried_after"] for r in retried]
    assert all("NodeLost" in why and victim_id in why for why in reasons), reasons
    print(f"node kill: {len(records)} results, {len(retried)} retried on the other node")
    # the killed node's engine still holds what its tasks made; its cleanup removes them
    _clean_run(cluster.engines[victim], run_id)
    assert _containers(cluster, run_id) == []
    client.close()
    cluster.restart_node(victim)


@pytest.mark.timeout(REACH_STATE_S + 600)
def test_sigterm_cancels_the_cluster_run_and_keeps_partial_results(cluster, tmp_path):
    """SIGTERM (a CI runner's cancel) ends a cluster run as Ctrl-C does. Ctrl-C itself, with its
    time bound, is test_ray_faults.py's `test_ctrl_c_with_tasks_on_two_nodes_...`."""
    tasks = {"expert/quick": task_yaml("quick", sleep_then_answer(0))}
    tasks.update(
        {f"expert/slow{i}": task_yaml(f"slow{i}", sleep_then_answer(300)) for i in range(3)}
    )
    project = make_project(tmp_path, tasks)
    run = ClusterRun(cluster, project, "--super-agent=gold", "--super-executor=ray", "-q")
    wait_for(
        lambda: any(r["task_id"] == "quick" for r in _records_or_none(project)),
        REACH_STATE_S,
        "the quick task's result",
    )
    wait_for(lambda: len(_all_containers(cluster)) >= 2, 120, "slow tasks running on the nodes")
    started = time.monotonic()
    os.kill(run.proc.pid, signal.SIGTERM)  # the controller alone, as a CI runner's cancel
    code = run.wait(180)
    took = time.monotonic() - started
    out = run.output()
    assert code == 2, out[-4000:]  # interrupted
    records = _records(project / "reports")
    assert [r["task_id"] for r in records if r["outcome"] == "passed"] == ["quick"]
    assert _containers(cluster, _run_id(project / "reports")) == [], out[-3000:]
    print(f"SIGTERM: the cluster run ended {took:.1f} s after it")


def _records_or_none(project: Path) -> list[dict[str, Any]]:
    with contextlib.suppress(ValueError, FileNotFoundError, json.JSONDecodeError):
        return _records(project / "reports")
    return []


def _all_containers(cluster: Any) -> list[str]:
    names = []
    for address in cluster.engines:
        with contextlib.suppress(docker.errors.DockerException):
            client = docker.DockerClient(base_url=address)
            names += [c.name for c in client.containers.list(filters={"label": LABEL_RUN})]
            client.close()
    return names


# -- a model endpoint in the cluster's namespace -----------------------------------------------
def _in_namespace(name: str, make: Any) -> Any:
    """`make()` called on a thread that joined the network namespace `name` (setns acts per
    thread): a server it binds listens on that namespace's loopback, where the nodes are."""
    made: list[Any] = []
    failed: list[BaseException] = []

    def enter() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(f"/var/run/netns/{name}") as ns:
                if libc.setns(ns.fileno(), 0x40000000) != 0:  # CLONE_NEWNET
                    raise OSError(ctypes.get_errno(), "setns")
            made.append(make())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            failed.append(exc)

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return made[0]


SUBMIT = 'Thought: done\nAction: submit\n<content>\n{"x": 1}\n</content>'
RUN = "Thought: look\nAction: execute\n<content>\nprint(6 * 7)\n</content>"


def test_a_scripted_endpoint_drives_an_llm_agent_on_a_node_and_the_key_stays_secret(
    cluster, tmp_path
):
    server = _in_namespace(cluster.name, FakeOpenAIServer)
    try:
        server.script([RUN, SUBMIT])
        project = make_project(tmp_path, {"expert/llm": task_yaml("llm", "print(1)")})
        run = ClusterRun(
            cluster,
            project,
            "--super-agent=react",
            "--super-model=scripted",
            "--super-executor=ray",
            f"--super-base-url={server.base_url}",
            "--super-live",
            "-q",
            f"--junitxml={tmp_path / 'junit.xml'}",
            env={"SUPER_API_KEY": SECRET},
        )
        code = run.wait(300)
        out = run.output()
        assert code == 0, out[-4000:]
        (record,) = _records(project / "reports")
        assert "[llm] execute: look" in out and "    | 42" in out  # each step shown live here
        assert record["exit_status"] == "submitted" and record["accuracy"] == 1.0
        assert record["steps"] == 2 and record["node"]
        bodies = [r for r in server.requests if r.messages]
        assert len(bodies) == 2 and "42" in bodies[1].prompt_text  # the node's kernel ran it
        assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in bodies)
    finally:
        server.stop()
    listing = cluster.run(
        [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "list",
            "tasks",
            "--detail",
            "--limit",
            "1000",
        ],
        timeout=120,
    )
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert "pytest-super llm" in listing.stdout  # the listing does show our task
    assert SECRET not in listing.stdout + listing.stderr
    leaked = [str(p) for p in _files(Path(cluster.root)) if _holds(p, SECRET)]
    assert leaked == [], leaked  # Ray's session folder: logs, runtime envs, metadata
    written = [
        str(p) for p in (project / "reports").rglob("*") if p.is_file() and _holds(p, SECRET)
    ]
    assert (
        written == [] and SECRET not in out and SECRET not in (tmp_path / "junit.xml").read_text()
    )


def _files(root: Path) -> list[Path]:
    """The regular files under `root` now. Not `rglob`: the nodes' engines remove containers'
    folders while the walk goes on (their overlay layers are under the cluster's root), and a
    folder gone between its listing and its scan stopped `rglob` with FileNotFoundError (issue
    42); `os.walk` skips it, as it no longer holds anything."""
    found = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                found.append(path)
    return found


def _holds(path: Path, secret: str) -> bool:
    with contextlib.suppress(OSError):
        if path.stat().st_size < 200 * 2**20:
            return secret.encode() in path.read_bytes()
    return False


def over_limit(task_id: str) -> str:
    """A task the gold agent fails: its compute limit (2 s) ends the episode before the answer.
    A wrong answer would not do: a gold miss is an environment error, never a failure."""
    nap = sleep_then_answer(1.5)
    return task_yaml(task_id, nap, nap, "print('{\"x\": 1}')", limits={"compute_s": 2})


def test_keep_leaves_a_failing_tasks_container_on_its_node_and_says_where(cluster, tmp_path):
    project = make_project(tmp_path, {"expert/wrong": over_limit("wrong")})
    run = ClusterRun(cluster, project, "--super-agent=gold", "--super-executor=ray", "--super-keep")
    assert run.wait(300) == 1
    out = run.output()
    assert "on Ray node" in out and "docker exec" in out, out[-3000:]
    run_id = _run_id(project / "reports")
    (kept,) = _containers(cluster, run_id)
    for address in cluster.engines:  # `pytest-super cleanup --run` on each node, when done
        _clean_run(address, run_id)
    assert _containers(cluster, run_id) == []


def test_image_build_on_every_node_with_one_command(cluster, image):
    done = cluster.run(
        [sys.executable, "-m", "pytest_super.cli", "image", "build", "--ray"], timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 2 and all(line.endswith(f": {image}") for line in lines), done.stdout
    assert len({line.split(":", 1)[0] for line in lines}) == 2  # one line per node


def test_the_second_worker_node_gets_the_image_by_pulling_from_a_registry(cluster, image, tmp_path):
    """A real registry (Debian's docker-registry) and the module's cluster: worker node 1's engine
    loses the kernel image; a run with --super-registry has it pull the image (not build it).

    The registry listens on the host's loopback, not the cluster namespace's: the node engines'
    dockerd run in the host's network namespace (tests/support/ray_cluster.py) and pull from there,
    so a registry on the namespace's loopback is out of their reach."""
    from pytest_super.cli import main as cli
    from tests.support.registry_server import running_registry

    node = docker.DockerClient(base_url=cluster.engines[1])
    try:
        with running_registry() as registry:
            assert cli(["image", "push", "--registry", registry.address]) == 0  # main engine
            # an earlier test's kernel container on this node may still be going (removed in
            # the background); the engine refuses to untag an image a container uses. (The
            # engine's reaper, kernels/docker/reaper.py, runs this image under a tag of its own,
            # so it is no obstacle: only our task containers, labelled pytest-super=1, are.)
            wait_for(
                lambda: (
                    not node.containers.list(
                        all=True, filters={"ancestor": image, "label": "pytest-super=1"}
                    )
                ),
                60,
                "node 1's earlier kernel containers to be removed",
            )
            node.images.remove(image)
            assert not node.images.list(name=image.split(":")[0])
            project = make_project(
                tmp_path,
                {f"expert/r{i}": task_yaml(f"r{i}", sleep_then_answer(4)) for i in range(4)},
            )
            run = ClusterRun(
                cluster,
                project,
                "--super-agent=gold",
                "--super-executor=ray",
                f"--super-registry={registry.address}",
            )
            code = run.wait(420)
            out = run.output()
        assert code == 0, out[-4000:]
        records = _records(project / "reports")
        assert [r["outcome"] for r in records] == ["passed"] * 4
        nodes = {r["node"] for r in records}
        assert len(nodes) == 2, nodes  # both worker nodes ran tasks
        pulled = [line for line in out.splitlines() if "pulled the kernel image" in line]
        assert len(pulled) == 1, out[-3000:]  # node 1 alone lacked it
        assert image in pulled[0] and registry.address in pulled[0]
        assert "built the kernel image" not in out and "failed (" not in out, out[-3000:]
        assert node.images.get(image).id == docker.from_env().images.get(image).id
        assert not node.images.list(name=f"{registry.address}/pytest-super-kernel")
        print(pulled[0])
    finally:  # the next tests need the image on every node
        if not node.images.list(name=image.split(":")[0]):
            subprocess.run(
                f"docker save {image} | docker -H {cluster.engines[1]} load -q",
                shell=True,
                check=True,
            )
        node.close()


def test_x_stops_the_cluster_run_at_the_first_failure_and_cancels_the_rest(cluster, tmp_path):
    tasks = {"expert/wrong": over_limit("wrong")}
    tasks.update(
        {f"expert/slow{i}": task_yaml(f"slow{i}", sleep_then_answer(300)) for i in range(3)}
    )
    project = make_project(tmp_path, tasks)
    started = time.monotonic()
    run = ClusterRun(
        cluster, project, "--super-agent=gold", "--super-executor=ray", "-x", "-k", "wrong or slow"
    )
    code = run.wait(240)
    out = run.output()
    assert code == 1, out[-3000:]
    assert time.monotonic() - started < 120  # not the 300 s the slow tasks would take
    records = _records(project / "reports")
    assert [(r["task_id"], r["outcome"]) for r in records] == [("wrong", "failed")]
    assert "stopping after 1 failures" in out
    assert _containers(cluster, _run_id(project / "reports")) == []


def test_the_deadline_of_pytest_timeout_holds_on_the_node(cluster, tmp_path):
    project = make_project(
        tmp_path,
        {"expert/late": task_yaml("late", sleep_then_answer(600))},
        timeouts={"late": 8},
    )
    started = time.monotonic()
    run = ClusterRun(cluster, project, "--super-agent=gold", "--super-executor=ray")
    code = run.wait(400)
    took = time.monotonic() - started
    out = run.output()
    assert code == 1, out[-3000:]
    (record,) = _records(project / "reports")
    assert record["outcome"] == "error" and record["exit_status"] == "timeout", record
    assert "Timeout (>8s) from pytest-timeout" in out
    assert took < 240, took  # long before the 300 s cell timeout and the task's own 600 s
    assert _containers(cluster, _run_id(project / "reports")) == []


@pytest.mark.timeout(900, method="signal")  # a cluster of its own and an image build
def test_a_node_without_the_kernel_image_builds_it_once_for_concurrent_tasks(image, tmp_path):
    """A node whose engine has only the offline Debian base (not the kernel image): the first
    task there builds the image, the one running beside it waits for that build; a
    --super-registry that does not answer makes the failed pull fall back to that build, said
    once for both tasks; and the build, longer than the tasks' 20 s deadline, is not charged to
    it (the wait for the image is the node's, not the task's)."""
    from pytest_super.kernels.docker.image import OFFLINE_BASE
    from tests.support.ray_cluster import GIB, RayTestCluster
    from tests.support.registry_server import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    project = make_project(
        tmp_path,
        {f"expert/b{i}": task_yaml(f"b{i}", sleep_then_answer(1)) for i in range(2)},
        timeouts={"b0": 20, "b1": 20},
    )
    with RayTestCluster(OFFLINE_BASE, nodes=1, num_cpus=4, memory=8 * GIB) as bare:
        node = docker.DockerClient(base_url=bare.engines[0])
        assert not node.images.list(name=image.split(":")[0])  # the kernel image is not there
        run = ClusterRun(
            bare,
            project,
            "--super-agent=gold",
            "--super-executor=ray",
            f"--super-registry={address}",
        )
        code = run.wait(780)
        out = run.output()
        assert code == 0, out[-4000:]
        assert [r["outcome"] for r in _records(project / "reports")] == ["passed", "passed"]
        built = [line for line in out.splitlines() if "built the kernel image" in line]
        assert len(built) == 1 and image in built[0], out[-3000:]
        took = float(re.search(r"\((\d+) s\)", built[0]).group(1))  # type: ignore[union-attr]
        assert took > 20, built[0]  # longer than the deadline the tasks met
        failed = f"pulling the kernel image {image} from the registry {address} failed ("
        assert out.count(failed) == 1, out[-3000:]
        assert "pulled the kernel image" not in out
        assert node.images.get(image)  # the tag the controller named, made there
        print(built[0])
        node.close()


def test_resume_on_the_cluster_sends_no_task_with_a_final_result(cluster, tmp_path):
    project = make_project(
        tmp_path,
        {
            "expert/good": task_yaml("good", sleep_then_answer(0)),
            "expert/wrong": over_limit("wrong"),
        },
    )
    first = ClusterRun(cluster, project, "--super-agent=gold", "--super-executor=ray", "-k", "good")
    assert first.wait(300) == 0
    second = ClusterRun(
        cluster, project, "--super-agent=gold", "--super-executor=ray", "--super-resume", "-rs"
    )
    assert second.wait(300) == 1, second.output()[-3000:]
    out = second.output()
    runs = sorted(p for p in (project / "reports").iterdir() if p.is_dir())
    assert len(runs) == 2
    latest = [json.loads(line) for line in (runs[-1] / "results.jsonl").read_text().splitlines()]
    by_id = {r["task_id"]: r for r in latest}
    assert by_id["good"].get("resumed_from") == runs[0].name  # carried over, not sent again
    (earlier,) = [json.loads(line) for line in (runs[0] / "results.jsonl").read_text().splitlines()]
    assert by_id["good"]["node"] == earlier["node"]  # the node of the run it came from
    assert by_id["wrong"]["outcome"] == "failed" and by_id["wrong"].get("node")  # ran on a node
    assert "resumed: passed" in out


def test_the_longest_task_is_submitted_first_on_the_cluster(cluster, tmp_path):
    """Issue 33: known durations (here a pytest-split file) put the long task, listed last, first
    in the executor's queue; one task in flight at a time, so results come in submission order."""
    project = _sleepers(tmp_path, 3, 0)
    seconds = {"t00": 1, "t01": 2, "t02": 100}
    (project / "durations.json").write_text(
        json.dumps({f"tasks/expert/{t}.yaml::{t}": s for t, s in seconds.items()})
    )
    run = ClusterRun(
        cluster,
        project,
        "--super-agent=gold",
        "--super-executor=ray",
        "--super-ray-concurrency=1",
        "--super-durations=durations.json",
    )
    assert run.wait(300) == 0, run.output()[-3000:]
    assert "pytest-super: order longest (default); durations: --super-durations" in run.output()
    assert [r["task_id"] for r in _records(project / "reports")] == ["t02", "t01", "t00"]
    assert _containers(cluster, _run_id(project / "reports")) == []


def test_the_progress_line_counts_the_tasks_in_flight_and_each_nodes_tasks(cluster, tmp_path):
    """Issue 33 item 5 on the cluster (--super-progress auto, the output a pipe): one status line
    a second (PYTEST_SUPER_PROGRESS_INTERVAL=1) with the tasks in flight and queued as the
    dispatcher has them (4 slots: 2 nodes of 4 CPUs, tasks of 2), the failure, and the tasks each
    node finished, named as the results name the node."""
    import re

    tasks = {f"expert/s{i}": task_yaml(f"s{i}", sleep_then_answer(3)) for i in range(6)}
    tasks["expert/bad"] = over_limit("bad")
    project = make_project(tmp_path, tasks)
    run = ClusterRun(
        cluster,
        project,
        "--super-agent=gold",
        "--super-executor=ray",
        "-q",
        env={"PYTEST_SUPER_PROGRESS_INTERVAL": "1"},
    )
    assert run.wait(420) == 1, run.output()[-3000:]
    out = run.output()
    status = re.findall(r"(?m)^pytest-super: (\d+) running, (\d+) queued, (\d+)/7 done.*$", out)
    assert len(status) >= 3, out[-3000:]
    counts = [tuple(map(int, line)) for line in status]
    assert all(sum(c) == 7 for c in counts), counts  # each task running, queued or done
    assert max(c[0] for c in counts) == 4 and any(c[1] > 0 for c in counts), counts
    lines = [ln for ln in out.splitlines() if ln.startswith("pytest-super: ") and "running" in ln]
    nodes = {r["node"] for r in _records(project / "reports")}
    assert "1 failed" in lines[-1] or any("1 failed" in ln for ln in lines), lines
    assert any(all(f"{node}: " in ln for node in nodes) for ln in lines), (nodes, lines[-3:])
