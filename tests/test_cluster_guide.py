"""docs/cluster.md's step-by-step guide is what scripts/cluster-guide.sh runs, and it runs.

The walk-through builds wheels of this checkout, installs them into a venv per "machine", starts a
head and a worker with `pytest-super ray-node` (from the wheel) in a network namespace of its own with only loopback
(192.0.2.10 on its lo standing for the machines' address; the worker's engine is the main one,
reached through its unix socket), builds the image on the nodes, runs a gold task on the cluster,
upgrades the nodes to a second wheel and runs the task again, then stops the nodes and checks that
only they stopped and that nothing is left (scripts/cluster-guide.sh's header).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "cluster.md"
WALK = ROOT / "scripts" / "cluster-guide.sh"
NODE = ROOT / "scripts" / "ray-node.sh"  # the checkout's wrapper of the packaged script
NODE_SCRIPT = ROOT / "pytest_super" / "executors" / "ray" / "ray-node.sh"
NODE_COMMAND = '"$VENV/bin/pytest-super" ray-node '
SECTION = "## A cluster, step by step"
NOT_RUN = "# not run by the walk-through"


def _guide_commands() -> list[str]:
    """The command lines of the guide section's code blocks, continuation lines joined, without
    those marked as not run by the walk-through."""
    text = GUIDE.read_text()
    assert SECTION in text, f"docs/cluster.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", section, re.M | re.S)
    lines = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and NOT_RUN not in line:
                lines.append(" ".join(line.split()))
    return lines


def _script_lines(path: Path) -> set[str]:
    return {" ".join(line.split()).removesuffix(" &") for line in path.read_text().splitlines()}


def test_the_guides_commands_are_the_walk_throughs_lines():
    guide = _guide_commands()
    script = _script_lines(WALK)
    assert len(guide) >= 8, guide  # the blocks were found: the check below means something
    missing = [line for line in guide if line not in script]
    assert not missing, (
        f"docs/cluster.md shows commands scripts/cluster-guide.sh does not run: {missing}; "
        f"run them there or mark them '{NOT_RUN} (why)'"
    )
    unshown = sorted(line for line in script if line.startswith(NODE_COMMAND) and line not in guide)
    assert not unshown, f"scripts/cluster-guide.sh runs ray-node lines the guide omits: {unshown}"


def test_every_option_the_guide_gives_ray_node_sh_is_one_it_reads():
    options = {
        option
        for line in _guide_commands()
        if line.startswith(NODE_COMMAND)
        for option in re.findall(r"(?<= )--[a-z-]+", line)
    }
    assert {"--tasks", "--super-cpus", "--super-mem", "--docker-host"} <= options
    script = NODE_SCRIPT.read_text()
    unread = sorted(o for o in options if f"      {o})" not in script)
    assert not unread, f"{NODE_SCRIPT.name} does not parse {unread}"


def _node_sh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("sizing", "message"),
    [
        (("--tasks", "3", "--super-cpus", "0.5", "--super-mem", "1g"), "3 x --super-cpus 0.5"),
        (("--tasks", "2", "--super-cpus", "two", "--super-mem", "1g"), "--super-cpus two"),
        (("--tasks", "2", "--super-cpus", "1", "--super-mem", "4x"), "--super-mem 4x"),
        (("--tasks", "2", "--super-cpus", "1"), "--tasks needs --super-cpus and --super-mem"),
    ],
)
def test_a_worker_whose_sizing_ray_cannot_take_is_refused_before_ray_starts(
    tmp_path, sizing, message
):
    done = _node_sh(
        "worker",
        str(tmp_path / "n"),
        "--address",
        "127.0.0.1:9",
        "--docker-host",
        "unix:///nonexistent.sock",
        *sizing,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr, done.stderr
    assert not (tmp_path / "n" / "node.pid").exists()  # nothing was started


def test_stop_of_a_folder_where_no_node_ran_says_so(tmp_path):
    done = _node_sh("stop", str(tmp_path))
    assert done.returncode == 2 and f"no node.pid in {tmp_path}" in done.stderr, done.stderr


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.guide  # make test-cluster-guide
@pytest.mark.xdist_group("ray")
def test_the_walk_through_runs_every_step_and_leaves_nothing(image):
    from tests.support.second_engine import _cannot_start_second_engine

    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ss") is None:
        _cannot_start_second_engine("the walk-through needs root, unshare and ss (iproute2)")
    engine = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not engine.startswith("unix://"):
        pytest.skip(f"the walk-through reaches the engine by its unix socket, not {engine}")
    work = Path(tempfile.mkdtemp(prefix="cg.", dir="/tmp"))  # short: Ray's socket paths
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "PYTEST_XDIST"))}
    env["ENGINE"] = engine
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(WALK), str(work)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
            start_new_session=True,
        )
        took = time.monotonic() - started
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-6000:]
        steps = re.findall(r"^== (\d)\. .* \((\d+) s\)$", done.stdout, re.M)
        assert [n for n, _ in steps] == ["1", "2", "3", "4", "5", "6"], done.stdout
        # sized from --tasks 2 --super-cpus 1 --super-mem 1g, and Ray took it
        assert "--num-cpus=2 --memory=2147483648" in out
        assert "0.0/2.0 CPU" in out and "0B/2.00GiB memory" in out, out[-6000:]
        # the GCS listens on every address of the (namespace's) machine, as the guide says
        assert re.search(r"^  tcp \*:6379 gcs_server$", done.stdout, re.M), done.stdout
        assert done.stdout.count("1 passed") == 2, out[-6000:]
        venv = f"{work}/w1/venv/lib/"
        versions = re.findall(r"^node-version: pytest-super (\S+) from (\S+),", done.stdout, re.M)
        assert len(versions) == 2 and versions[1][0] == versions[0][0] + ".post1", versions
        assert all(path.startswith(venv) for _, path in versions), versions  # the wheel's
        head = re.search(r"head processes while the worker stopped: (\d+) before, (\d+) after", out)
        assert head and int(head[2]) > 0, out[-3000:]  # stopping the worker left the head
        assert "still runs" in out and "the bystander among them" in out, out[-3000:]
        assert "left: no process, no listener, no container" in out
        print(f"walk-through: {took:.0f} s; steps at {[int(s) for _, s in steps]} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
