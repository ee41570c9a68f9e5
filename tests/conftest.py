"""Shared test wiring: the `openai_server` fixture (a real scripted OpenAI-compatible HTTP server
on 127.0.0.1) and the policy for tests that need Docker: without an engine they are skipped on a
developer's machine, but with CI=true they run and fail — a missing engine never hides as skips.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest
from openai_server import FakeOpenAIServer


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A fresh fake endpoint per test; `.script([...])` what it answers, `.requests` what it got."""
    server = FakeOpenAIServer()
    try:
        yield server
    finally:
        server.stop()


@functools.cache
def _engine_problem() -> str | None:
    from pytest_super.errors import EngineUnavailable
    from pytest_super.kernels import docker_client
    from pytest_super.kernels.base import KernelSettings

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
