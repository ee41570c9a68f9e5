"""One Ray test cluster (tests/support/ray_cluster.py) for every cluster test of a session (one
xdist worker runs them all: the xdist group "ray"): the executor's tests (tests/test_ray_backend.py)
and the fault tests (tests/test_ray_faults.py) share it, since starting one takes a minute of CI.

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


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A head and two worker nodes of 4 CPUs and 8 GiB of Ray's logical resources each (two
    tasks of --super-cpus 2 per node), each with its own engine holding the kernel image;
    stopped at the session's end and checked to have left nothing."""
    from pytest_super.kernels.docker.image import build_image
    from tests.support.ray_cluster import GIB, start_ray_cluster

    image = build_image(offline=True, log=lambda line: None)
    yield from start_ray_cluster(image, nodes=2, num_cpus=4, memory=8 * GIB)


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
        repaired = ray_cluster.ensure_healthy()
    except Exception as exc:
        _broken.append(f"it could not be repaired before {request.node.nodeid}: {exc}")
        raise
    if repaired:
        print(f"the Ray test cluster was repaired before this test: {'; '.join(repaired)}")
    return ray_cluster


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
