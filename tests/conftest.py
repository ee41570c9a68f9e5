"""Shared test wiring: the `openai_server` fixture (a real scripted OpenAI-compatible HTTP server
on 127.0.0.1), the scale and load tests' fixtures (`image`, `engine`, `second_engine`, `project_dir`) and the policy for tests that need Docker: without an engine they are skipped on a
developer's machine, but with CI=true they run and fail — a missing engine never hides as skips.

The two groups (docs/testing.md): `make test` runs `-m "not colab and not guide and not long"`,
`make test-all` adds the tests marked `long` here, at collection (`is_long`): by folder, by module,
by the cluster mark, so that a new file of a long suite is long without a mark of its own.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.openai_server import FakeOpenAIServer

TESTS = Path(__file__).resolve().parent
pytest_plugins = ["tests.support.ray_fixtures"]  # the session's one Ray test cluster

if TYPE_CHECKING:
    import docker

#: folders under tests/ whose every file is long: the attack suites (new rounds' files included)
LONG_FOLDERS = frozenset({"attacks"})
#: modules whose every test is long: the guardian's and the reaper's kill tests, the registry's
#: pushes, pulls and its fallback build
LONG_MODULES = frozenset(
    {
        "test_ray_faults.py",
        "test_ray_guardian.py",
        "test_dead_man_switch.py",
        "test_node_watchdog.py",
        "test_registry.py",
    }
)
#: single long tests of modules `make test` otherwise runs: the conformance suite on every
#: backend beyond the local one, and the image builds that are not served by the cache
LONG_TESTS = {
    "test_conformance.py": frozenset(
        {
            "test_the_suite_passes_for_the_docker_backend",
            "test_the_backend_shown_in_docs_backends_md_is_short_and_passes",
        }
    ),
    "test_image.py": frozenset({"test_a_failing_build_says_what_failed_and_leaves_no_tag"}),
}


def pytest_configure(config: pytest.Config) -> None:
    """SIGINT handled here, so that the processes the tests start (pytest runs, Ray nodes and
    their workers) take it. A suite started in the background of a script (`make test &`,
    `nohup`) inherits SIGINT ignored, passes it on through every exec, and then no Ctrl-C a test
    sends reaches its run, nor Ray's cancel (an interrupt) its task: in such a fresh-clone run
    seven tests failed waiting for an interrupted run to end. Python installs its own handler
    only where SIGINT is not ignored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # the local backend warns once a process: under xdist whichever test of a worker starts its
    # first local kernel showed it, one more line in the warnings summary from run to run
    # (test_kernel_runtime.py records it). Here only: a run of `tasks` in this checkout warns.
    config.addinivalue_line(
        "filterwarnings", "ignore:pytest-super. the local backend isolates nothing:UserWarning"
    )


def is_long(path: Path, name: str, marks: set[str]) -> bool:
    """Is the test `name` (its function's name) of the file `path`, with `marks`, run by
    `make test-all` only? Every cluster test (marked "ray") but the one smoke test (marked
    "cluster_smoke"), and what the tables above name."""
    if not path.is_relative_to(TESTS):  # a project of a test's own (pytester)
        return False
    if "ray" in marks:
        return "cluster_smoke" not in marks
    if LONG_FOLDERS.intersection(path.relative_to(TESTS).parts[:-1]):
        return True
    return path.name in LONG_MODULES or name in LONG_TESTS.get(path.name, ())


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects (pytest's own hook of this name)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        if is_long(item.path, getattr(item, "originalname", item.name), marks):
            item.add_marker(pytest.mark.long)


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A fresh fake endpoint per test; `.script([...])` what it answers, `.requests` what it got."""
    server = FakeOpenAIServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def image() -> str:
    """The default kernel image, built offline if missing."""
    from pytest_super.kernels.docker.image import build_image

    return build_image(offline=True, log=lambda line: None)


@pytest.fixture
def engine(image: str) -> docker.DockerClient:
    from pytest_super.kernels.docker.engine import docker_client_for

    return docker_client_for(None)


@pytest.fixture(scope="module")
def second_engine(image: str) -> Iterator[docker.DockerClient]:
    """A second Docker engine of this host holding `image` (tests/second_engine.py), one per
    module and xdist worker; stopped after the module."""
    from tests.support.second_engine import start_second_engine

    yield from start_second_engine(image)


@pytest.fixture
def project_dir(pytester: pytest.Pytester, engine: docker.DockerClient) -> Iterator[Path]:
    """A fresh folder for a project's pytest runs; whatever its runs (`reports/<run id>/`) leave
    on the engine is removed after the test."""
    from pytest_super.kernels.docker.cleanup import cleanup_containers

    yield pytester.path
    reports = pytester.path / "reports"
    for run_dir in sorted(reports.iterdir()) if reports.is_dir() else []:
        if run_dir.is_dir():
            cleanup_containers(engine, run_id=run_dir.name)


@functools.cache
def _engine_problem() -> str | None:
    from pytest_super.errors import EngineUnavailable
    from pytest_super.kernels.base import KernelSettings
    from pytest_super.kernels.docker.engine import docker_client

    try:
        docker_client(KernelSettings())
    except EngineUnavailable as exc:
        return str(exc)
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is None or os.environ.get("CI"):
        return
    problem = _engine_problem()
    if problem:
        pytest.skip(f"no Docker engine ({problem}); `make docker` starts one")
