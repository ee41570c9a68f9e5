"""The node's side of `--super-executor=ray` on the session's real Ray test cluster
(tests/support/ray_fixtures.py): `run_on_node` and `cleanup_on_node` called as the dispatcher
calls them, from a driver in the cluster's namespace, each Ray task placed on one worker node.

- a node whose Docker engine is stopped: the outcome says `engine_failed`, the error names the
  node and its engine (never a Ray task failure);
- a task's folders on its node (`pytest-super-node-<run>-<pid>-<ticks>-*`, the run's start-lock
  folder) go when it ends and when Ray cancels it; a force-cancelled (killed) task's go by its
  watchdog within seconds, or, with the dead man's switch off, at the next start-up clean-up on
  the node (`cleanup_on_node(run, None)`), or by `cleanup --run`.

The wait for the kernel image on a node without it is not charged to the task's deadline:
tests/test_ray_backend.py (its node without the image)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.projects import make_project, sleep_then_answer, task_yaml
from tests.support.ray_fixtures import CLUSTER_TESTS

pytestmark = CLUSTER_TESTS

#: run in the cluster's namespace: argv[1] is a JSON spec; prints one JSON line per step
DRIVER = r"""
import json, sys, time
import ray
from pathlib import Path

spec = json.loads(sys.argv[1])
ray.init(address=spec["address"], log_to_driver=False, configure_logging=False)
from pytest_super.executors.ray import node as N
from pytest_super.settings import SuperRun
from pytest_super.tasks import load_tasks

here = {"resources": {spec["resource"]: 0.001}, "num_cpus": 0, "max_retries": 0}
run = SuperRun.resolve(spec["project"], agent="gold", run_id=spec["run_id"])
(task,) = load_tasks(Path(spec["project"]) / "tasks" / "expert" / f"{spec['task']}.yaml")

@ray.remote
def on_node(task, run, name, deadline_s):
    return N.run_on_node(task, run, name, deadline_s, [], None)

@ray.remote
def look(run_id):
    import tempfile
    from pytest_super.locks import private_dir
    folders = sorted(p.name for p in Path(tempfile.gettempdir()).glob(N.nodefiles.NODE_FOLDER_PREFIX + "*"))
    return {"folders": folders, "lock": (private_dir() / f"ray-{run_id}").exists()}

@ray.remote
def clean(run, run_id):
    return N.cleanup_on_node(run, run_id)

def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)

def looked():
    return ray.get(look.options(**here).remote(run.run_id), timeout=120)

def outcome_fields(o):  # a NodeOutcome: the task's TaskOutcome and the node's own fields
    t = o.outcome
    return {k: getattr(o, k) for k in ("engine_failed", "built_image", "build_s", "started_at",
            "ended_at")} | {
            "error": None if t.error is None else [t.error.kind, t.error.message],
            "timed_out_after_s": t.timed_out_after_s,
            "status": None if t.result is None else str(t.result.exit_status)}

options = dict(here)
if spec.get("switch") == "off":  # the node's dead man's switch off for this task's worker
    options["runtime_env"] = {"env_vars": {"PYTEST_SUPER_DEAD_MAN_SWITCH": "off"}}
ref = on_node.options(**options).remote(task, run, spec["task"], spec.get("deadline_s"))
if spec["mode"] == "run":
    say("outcome", **outcome_fields(ray.get(ref, timeout=300)))
    say("after", **looked())
else:
    t0 = time.monotonic()
    # inside the task: its folder made, and its kernel's start begun (the run's start lock),
    # which may come seconds after the folder (the node's reaper image is made first)
    while not ((seen := looked())["lock"] and [f for f in seen["folders"] if run.run_id in f]):
        assert time.monotonic() - t0 < 240, "the task's folder and start lock never appeared"
        time.sleep(0.5)
    say("during", **looked())
    time.sleep(2)  # inside the episode
    ray.cancel(ref, force=spec["mode"] == "force")
    cancelled = time.monotonic()
    try:
        ray.get(ref, timeout=120)
        say("ended")
    except Exception as exc:
        say("cancelled", error=type(exc).__name__)
    if spec["mode"] == "force" and spec.get("switch") != "off":
        while [f for f in looked()["folders"] if run.run_id in f] or looked()["lock"]:
            assert time.monotonic() - cancelled < 60, "the killed task's folders stayed 60 s"
            time.sleep(0.5)
        say("watchdog", took=time.monotonic() - cancelled)
    time.sleep(2)
    say("after", **looked())
    if spec["mode"] == "force" and spec.get("switch") == "off":
        which = run.run_id if spec.get("cleanup_run") else None
        say("cleanup", node=ray.get(clean.options(**here).remote(run, which), timeout=120)[0])
        say("after-cleanup", **looked())
"""


def _drive(cluster: Any, project: Path, task: str, node: int, mode: str, **more: Any) -> dict:
    """The driver's steps, by name, after it ran in the cluster's namespace."""
    spec = {
        "address": cluster.address,
        "resource": cluster.node_resource(node),
        "project": str(project),
        "run_id": f"nodes-{time.monotonic_ns()}",
        "task": task,
        "mode": mode,
        **more,
    }
    done = cluster.run([sys.executable, "-c", DRIVER, json.dumps(spec)], timeout=360, cwd=project)
    steps = {}
    for line in done.stdout.splitlines():
        if line.startswith('{"step"'):
            fields = json.loads(line)
            steps[fields.pop("step")] = fields
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    steps["run_id"] = spec["run_id"]
    return steps


def test_a_node_whose_engine_is_stopped_gives_an_engine_failed_outcome(cluster, tmp_path):
    project = make_project(tmp_path, {"expert/e": task_yaml("e", sleep_then_answer(1))})
    cluster.kill_engine(1)
    try:
        steps = _drive(cluster, project, "e", 1, "run")
    finally:
        cluster.restart_engine(1)
    outcome = steps["outcome"]
    assert outcome["engine_failed"] is True, outcome
    kind, message = outcome["error"]
    assert kind == "EngineUnavailable", outcome
    engine = cluster.engines[1]
    # the backend's own description of its engine (`kernels.backend_resources(...).where`)
    assert message.startswith(f"the Docker engine at {engine} on node "), message
    assert " failed: " in message, message
    assert outcome["status"] is None and outcome["timed_out_after_s"] is None
    assert not [f for f in steps["after"]["folders"] if steps["run_id"] in f], steps
    assert steps["after"]["lock"] is False, steps


def test_a_task_leaves_no_folder_on_its_node_when_it_ends(cluster, tmp_path):
    project = make_project(tmp_path, {"expert/f": task_yaml("f", sleep_then_answer(1))})
    steps = _drive(cluster, project, "f", 0, "run", deadline_s=300)
    assert steps["outcome"]["status"] == "submitted", steps
    assert steps["outcome"]["engine_failed"] is False
    assert not [f for f in steps["after"]["folders"] if steps["run_id"] in f], steps
    assert steps["after"]["lock"] is False, steps


def test_a_cancelled_task_leaves_no_folder_on_its_node(cluster, tmp_path):
    project = make_project(tmp_path, {"expert/c": task_yaml("c", sleep_then_answer(120))})
    steps = _drive(cluster, project, "c", 0, "cancel")
    run_id = steps["run_id"]
    (folder,) = [f for f in steps["during"]["folders"] if run_id in f]
    assert folder.startswith(f"pytest-super-node-{run_id}-"), folder
    assert steps["during"]["lock"] is True
    assert "cancelled" in steps, steps
    assert not [f for f in steps["after"]["folders"] if run_id in f], steps
    assert steps["after"]["lock"] is False, steps


def test_a_killed_tasks_folders_go_by_its_watchdog_within_seconds(cluster, tmp_path):
    """Force-cancelled (its Ray worker killed): its task folder and the run's start-lock folder
    are removed by the task's watchdog (executors/ray/watchdog.py), with no later run and no
    command."""
    project = make_project(tmp_path, {"expert/w": task_yaml("w", sleep_then_answer(120))})
    steps = _drive(cluster, project, "w", 0, "force")
    run_id = steps["run_id"]
    (folder,) = [f for f in steps["during"]["folders"] if run_id in f]
    assert "cancelled" in steps, steps
    assert folder not in steps["after"]["folders"] and steps["after"]["lock"] is False, steps
    print(f"a force-cancelled task's folders removed {steps['watchdog']['took']:.1f} s after")


@pytest.mark.parametrize("by", ["start-up", "cleanup --run"])
def test_a_killed_tasks_folders_go_at_the_next_start_up_clean_up_on_its_node(cluster, tmp_path, by):
    """Force-cancelled with the dead man's switch off (its Ray worker killed): its folders stay,
    until the next run's start-up clean-up on the node (`cleanup_on_node(run, None)`: the worker
    is provably gone), or the run's clean-up (`cleanup_on_node(run, ID)`, what `pytest-super
    cleanup --run ID` runs)."""
    project = make_project(tmp_path, {"expert/k": task_yaml("k", sleep_then_answer(120))})
    steps = _drive(
        cluster, project, "k", 0, "force", cleanup_run=by == "cleanup --run", switch="off"
    )
    run_id = steps["run_id"]
    (folder,) = [f for f in steps["during"]["folders"] if run_id in f]
    assert "cancelled" in steps, steps
    assert folder in steps["after"]["folders"], steps  # killed: nothing of it ran on
    assert steps["after"]["lock"] is True, steps
    assert folder not in steps["after-cleanup"]["folders"], steps
    assert steps["after-cleanup"]["lock"] is False, steps


def test_the_address_check_passes_on_a_real_cluster_and_reads_its_versions(cluster):
    """connect.py's check (HTTP/2 greeting, the GCS's KV entry of versions) against a real GCS,
    then `connect` (ray.init on a thread of its own): the driver works from the main thread."""
    script = (
        "import json, sys, time, ray\n"
        "from pytest_super.executors.ray import connect as c\n"
        "address = sys.argv[1]\n"
        "started = time.monotonic()\n"
        "versions = c._cluster_versions(address, time.monotonic() + c.CONNECT_TIMEOUT_S)\n"
        "c.connect(ray, address, 'pytest-super-connect-test')\n"
        "alive = [n for n in ray.nodes() if n['Alive']]\n"
        "two = ray.get(ray.remote(num_cpus=0)(lambda: 2).remote(), timeout=120)\n"
        "print(json.dumps({'versions': versions, 'alive': len(alive), 'two': two,\n"
        "                  'took': time.monotonic() - started}))\n"
    )
    done = cluster.run([sys.executable, "-c", script, cluster.address], timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    import platform

    import ray

    assert got["versions"] == [ray.__version__, platform.python_version()], got
    assert got["alive"] == cluster.nodes + 1 and got["two"] == 2, got
    print(f"address check and join on the test cluster: {got['took']:.1f} s")
