"""Kernel backends by name, and the one entry point that starts a kernel with the configured one.

A backend (`base.KernelBackend`) owns a kernel's whole lifecycle: `provision` a kernel for a task,
`cleanup_run` what a run left behind, `cleanup_dead_runs` what runs whose controller died left
behind. `docker` (`docker.py`) and `local` (`local.py`) are the two; `kernel_backend` picks one by
`KernelSettings.backend`, and `provision_kernel` starts a kernel with it. The engine connection and
labels (`engine.py`) and the cleanup of leftovers (`cleanup.py`) are named here too.
"""

from __future__ import annotations

import importlib

from pytest_super.kernels.base import Kernel, KernelBackend, KernelSettings
from pytest_super.kernels.docker.cleanup import (
    HOST_FOLDER_PREFIX,
    KEPT_SUFFIX,
    OWNER_FILE,
    cleanup_containers,
    cleanup_host_folders,
    host_folder_root,
)
from pytest_super.kernels.docker.engine import (
    LABEL,
    LABEL_HOST,
    LABEL_PID,
    LABEL_RUN,
    LABEL_TASK,
    LABEL_WORKER,
    docker_client,
    docker_client_for,
    engine_address,
    forget_docker_client,
)

#: the backends by name; each module is imported when its backend is first asked for (the docker
#: backend brings the Docker SDK, which a local run never needs)
BACKENDS: dict[str, str] = {
    "docker": "pytest_super.kernels.docker.backend:DockerBackend",
    "local": "pytest_super.kernels.local:LocalBackend",
}


def kernel_backend(settings: KernelSettings) -> KernelBackend:
    """The backend `settings.backend` names."""
    target = BACKENDS.get(settings.backend)
    if target is None:
        raise ValueError(
            f"unknown kernel backend {settings.backend!r}; use {' or '.join(map(repr, BACKENDS))}"
        )
    module, _, name = target.partition(":")
    backend: KernelBackend = getattr(importlib.import_module(module), name)()
    return backend


def provision_kernel(settings: KernelSettings, *, task_id: str) -> Kernel:
    """Start a fresh kernel for one task with the configured backend; it is ready to execute."""
    return kernel_backend(settings).provision(settings, task_id=task_id)


__all__ = [
    "BACKENDS",
    "HOST_FOLDER_PREFIX",
    "KEPT_SUFFIX",
    "LABEL",
    "LABEL_HOST",
    "LABEL_PID",
    "LABEL_RUN",
    "LABEL_TASK",
    "LABEL_WORKER",
    "OWNER_FILE",
    "cleanup_containers",
    "cleanup_host_folders",
    "docker_client",
    "docker_client_for",
    "engine_address",
    "forget_docker_client",
    "host_folder_root",
    "kernel_backend",
    "provision_kernel",
]
