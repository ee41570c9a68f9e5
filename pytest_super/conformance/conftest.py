"""Fixtures of the conformance suite: the backend `--super-backend` names, the kernel settings of
a run with these options, kernels provisioned through the registry, and the capability skips."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_super.kernels import kernel_backend, kernel_backend_class
from pytest_super.kernels.base import (
    Kernel,
    KernelBackend,
    KernelSettings,
    unsupported_capabilities,
)
from pytest_super.options import run_of

HERE = Path(__file__).resolve().parent

#: the output cap the suite's kernels are given (KernelSettings.output_cap_bytes): a backend must
#: keep a cell's output within the cap it is told
OUTPUT_CAP_BYTES = 64 * 1024


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(*capabilities): the backend capabilities a conformance test needs"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip, with the backend's own reason, each test that needs what the backend declares it
    cannot do. Done at collection, before any kernel is provisioned."""
    ours = [item for item in items if HERE in item.path.parents]
    if not ours:
        return
    spec = run_of(config).kernel.backend
    try:
        unsupported = unsupported_capabilities(kernel_backend_class(spec))
    except ValueError as exc:
        raise pytest.UsageError(f"--super-backend {spec!r}: {exc}") from exc
    for item in ours:
        for marker in item.iter_markers("needs"):
            for capability in marker.args:
                if capability in unsupported:
                    reason = f"backend {spec!r} does not support {capability!r}: "
                    item.add_marker(pytest.mark.skip(reason=reason + unsupported[capability]))


@pytest.fixture(scope="session")
def settings(pytestconfig: pytest.Config) -> KernelSettings:
    """The kernel settings of a run with these options (its run id: this session's)."""
    kernel = run_of(pytestconfig).kernel
    return dataclasses.replace(kernel, output_cap_bytes=OUTPUT_CAP_BYTES)


@pytest.fixture(scope="session")
def backend(settings: KernelSettings) -> KernelBackend:
    """This process's instance of the backend, made by the registry as a run makes it."""
    return kernel_backend(settings)


def provision(backend: KernelBackend, settings: KernelSettings, task_id: str) -> Kernel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the local backend's: it isolates nothing
        return backend.provision(settings, task_id=task_id)


@pytest.fixture(scope="module")
def kernel(backend: KernelBackend, settings: KernelSettings) -> Iterator[Kernel]:
    """One kernel shared by a module's tests that leave it as they found it."""
    made = provision(backend, settings, "conformance-shared")
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def fresh_kernel(
    backend: KernelBackend, settings: KernelSettings, request: pytest.FixtureRequest
) -> Iterator[Kernel]:
    """A kernel of its own for a test that kills, restarts or fills it."""
    made = provision(backend, settings, f"conformance-{request.node.name}"[:50])
    try:
        yield made
    finally:
        made.close()
