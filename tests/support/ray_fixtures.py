"""One Ray test cluster (tests/support/ray_cluster.py) for every cluster test of a session (one
xdist worker runs them all, one after the other: the xdist group "ray"): the executor's tests
(tests/test_ray_backend.py) and the fault tests (tests/test_ray_faults.py) share it, since
starting one takes a minute of CI; it stops after the last of them (`SessionCluster`). It has
two worker nodes, or one when the session's only cluster test is the smoke test (`nodes_needed`).

A test that breaks the cluster (a node cut off, an engine or the head killed) puts it back before
it ends (`heal`, `restart_engine`, `revive_node`, `restart_head`); a test that could not (it failed
or timed out first) is made good by the next one's `cluster` fixture (`ensure_healthy`), so that
one broken test never fails or hangs the rest. A cluster test has a bound of its own,
`CLUSTER_TIMEOUT` (pytest-timeout's signal method: the test fails, its fixtures' teardown runs
and the xdist worker holding the cluster lives on; the thread method of `make test`'s
--timeout would end the worker and orphan the cluster). Registered by tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: the bound of one cluster test (module mark): what the slowest one takes on a loaded machine,
#: about twice its time alone (`make test`'s --durations), well under the session's 900 s
CLUSTER_TIMEOUT = pytest.mark.timeout(600, method="signal")
#: the marks of a module of cluster tests (`pytestmark = CLUSTER_TESTS`): one xdist worker runs
#: them all (make test: --dist loadgroup), on the one cluster
CLUSTER_TESTS = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.xdist_group("ray"),
    CLUSTER_TIMEOUT,
]


class SessionCluster:
    """The session's one cluster: started by the first test that asks for it and stopped once
    the test after it does not ask (pytest's `nextitem`; under xdist the group "ray" runs its
    tests one after the other on one worker), or at the session's end. Kept to the session's
    end, an idle cluster (its head, two nodes and their two engines) took 14.5% of this 2-core
    machine, measured over 60 s, for every test of the other worker after the last cluster
    test (in `make test` about three quarters of the suite). Asked for again later (a run
    without xdist, where a cluster test of another module comes first), it starts again."""

    def __init__(self, nodes: int = 2) -> None:
        self._running: Iterator[Any] | None = None
        self.cluster: Any = None
        self.nodes = nodes

    def get(self) -> Any:
        """The running cluster, started first if it is not: a head and `nodes` worker nodes of
        4 CPUs and 8 GiB of Ray's logical resources each (two tasks of --super-cpus 2 per node),
        each with its own engine holding the kernel image."""
        if self.cluster is None:
            from pytest_super.kernels.docker.image import build_image
            from tests.support.ray_cluster import GIB, start_ray_cluster

            image = build_image(offline=True, log=lambda line: None)
            running = start_ray_cluster(image, nodes=self.nodes, num_cpus=4, memory=8 * GIB)
            self.cluster = next(running)
            self._running = running
        return self.cluster

    def stop(self) -> None:
        """Stop it, if it runs, and check that it left nothing (an AssertionError if it did)."""
        running, self._running, self.cluster = self._running, None, None
        if running is not None:
            next(running, None)


_SESSION_CLUSTER = pytest.StashKey[SessionCluster]()


def nodes_needed(items: list[pytest.Item]) -> int:
    """Worker nodes for a session of these tests: one when its only cluster tests are smoke
    tests (`make test`: three tasks that fit on one node; a second node and its engine, which
    loads the kernel image, took about 20 s of the cluster's start), else two (the long tests
    place tasks on a node of their choice, cut one off, or spread a run over both)."""
    cluster_tests = [item for item in items if item.get_closest_marker("ray") is not None]
    if all(item.get_closest_marker("cluster_smoke") is not None for item in cluster_tests):
        return 1
    return 2


@pytest.fixture(scope="session")
def ray_cluster(request: pytest.FixtureRequest) -> Iterator[SessionCluster]:
    """The session's cluster (`SessionCluster`), stopped at the session's end at the latest."""
    nodes = nodes_needed(request.session.items)
    session_cluster = request.session.stash[_SESSION_CLUSTER] = SessionCluster(nodes)
    yield session_cluster
    session_cluster.stop()


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last of a row of cluster tests (marked "ray"; its own teardown done), the
    session's cluster stops."""
    yield
    if nextitem is None or nextitem.get_closest_marker("ray") is None:
        session_cluster = item.session.stash.get(_SESSION_CLUSTER, None)
        if session_cluster is not None:
            session_cluster.stop()


#: why the session's cluster could not be made healthy, once it could not: every later cluster
#: test fails at once saying so, instead of each trying (and waiting) again
_broken: list[str] = []


@pytest.fixture
def cluster(ray_cluster: Any, request: pytest.FixtureRequest) -> Any:
    """The session's cluster, made healthy first (what an earlier test broke and could not put
    back: `RayTestCluster.ensure_healthy`); what was repaired is printed."""
    if _broken:
        pytest.fail(f"the session's Ray test cluster is broken: {_broken[0]}", pytrace=False)
    try:
        cluster = ray_cluster.get()
        repaired = cluster.ensure_healthy()
    except Exception as exc:
        _broken.append(f"it could not be started or repaired before {request.node.nodeid}: {exc}")
        raise
    if repaired:
        print(f"the Ray test cluster was repaired before this test: {'; '.join(repaired)}")
    return cluster


class ClusterRun:
    """One pytest process in the cluster's namespace (its own session: ours to signal)."""

    def __init__(
        self,
        cluster: Any,
        project: Path,
        *args: str,
        env: dict[str, str] | None = None,
        logs: Path | None = None,
    ):
        self.project = project
        self.log = (logs or project) / f"pytest-{time.monotonic_ns()}.log"
        self.started = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = cluster.popen(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                cwd=project,
                env=env or {},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait(self, timeout: float = 300) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            raise AssertionError(f"pytest did not end in {timeout} s:\n{self.output()}") from None

    def output(self) -> str:
        return self.log.read_text(errors="replace")
