"""Kernel backends by name, and the one entry point that starts a kernel with the configured one.

A backend (`base.KernelBackend`, whose docstring is the lifecycle contract) owns a kernel's whole
lifecycle: `provision` a kernel for a task, `cleanup_run` what a run left behind,
`cleanup_dead_runs` what runs whose controller died left behind. `docker` (`docker/backend.py`),
`local` (`local.py`) and `replay` (`replay/kernel.py`: a published episode played back) are built
in; others come from the entry-point group `pytest_super.backends` or as `package.module:Class` (`registry.Registry`, as agents do). `kernel_backend` gives the one
`KernelSettings.backend` names, `provision_kernel` starts a kernel with it, `settings_for_task`
asks it for a task's image, `prepare_task_image` has it make the image a task's own files describe
(`base.ImageSpec`: an LMR-Bench folder's Dockerfile). Nothing here is Docker's: the Docker engine's connection and labels
(`docker/engine.py`) and the cleanup of its leftovers (`docker/cleanup.py`) are still answered by
name for older imports (`__getattr__`), loaded only when asked for.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from typing import TYPE_CHECKING

from pytest_super.kernels.base import (
    ImageBackend,
    ImageSpec,
    Kernel,
    KernelBackend,
    KernelSettings,
    TaskImageBackend,
    TaskImageUnsupported,
)
from pytest_super.registry import Registry, qualified_name

if TYPE_CHECKING:  # Docker's names, as `__getattr__` gives them (for type checkers)
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

#: the Docker backend's names this package still answers, for code that imported them from here;
#: each is imported from its module when first asked for, so that running another backend loads
#: nothing of Docker's. New code imports them from `kernels.docker.engine` / `kernels.docker.cleanup`.
_DOCKER_NAMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "HOST_FOLDER_PREFIX",
            "KEPT_SUFFIX",
            "OWNER_FILE",
            "cleanup_containers",
            "cleanup_host_folders",
            "host_folder_root",
        ),
        "pytest_super.kernels.docker.cleanup",
    ),
    **dict.fromkeys(
        (
            "LABEL",
            "LABEL_HOST",
            "LABEL_PID",
            "LABEL_RUN",
            "LABEL_TASK",
            "LABEL_WORKER",
            "docker_client",
            "docker_client_for",
            "engine_address",
            "forget_docker_client",
        ),
        "pytest_super.kernels.docker.engine",
    ),
}


def __getattr__(name: str) -> object:
    module = _DOCKER_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


#: the entry-point group third-party backends register under
ENTRY_POINT_GROUP = "pytest_super.backends"

#: the built-in backends by name; each module is imported when its backend is first asked for (the
#: docker backend brings the Docker SDK, which a local run never needs)
BACKENDS: dict[str, str] = {
    "docker": "pytest_super.kernels.docker.backend:DockerBackend",
    "local": "pytest_super.kernels.local:LocalBackend",
    "replay": "pytest_super.replay.kernel:ReplayBackend",
}

_REGISTRY = Registry(
    kind="kernel backend", plural="kernel backends", group=ENTRY_POINT_GROUP, builtins=BACKENDS
)

#: what a backend class needs, for the error that says it lacks it
_NEEDS = "the methods `provision`, `cleanup_run` and `cleanup_dead_runs` (see KernelBackend)"

#: this process's backends: one instance per name, made on first use (KernelBackend's contract)
_instances: dict[str, KernelBackend] = {}
_instances_lock = threading.Lock()


def known_backend_names() -> list[str]:
    """Built-in names, then the names registered under the `pytest_super.backends` entry points."""
    return _REGISTRY.known_names()


def kernel_backend_class(spec: str) -> type:
    """The class a backend spec names (built-in name, entry point name, or `package.module:Class`),
    imported but not instantiated; ValueError if it names none (the message lists the known
    names) or names something that is not a `KernelBackend` class."""
    cls = _REGISTRY.find(spec)
    if not (isinstance(cls, type) and issubclass(cls, KernelBackend)):
        raise ValueError(
            f"kernel backend {spec!r} ({qualified_name(cls)}) is not a kernel backend: it "
            f"needs {_NEEDS}"
        )
    return cls


def kernel_backend(settings: KernelSettings) -> KernelBackend:
    """The backend `settings.backend` names: this process's instance, made on first use (without
    arguments). ValueError if the name is unknown or names no `KernelBackend`."""
    spec = settings.backend
    with _instances_lock:
        backend = _instances.get(spec)
        if backend is None:
            backend = kernel_backend_class(spec)()
            _instances[spec] = backend
    return backend


def settings_for_task(
    settings: KernelSettings, profile: str, spec: ImageSpec | None = None
) -> KernelSettings:
    """The kernel settings of one task whose image profile is `profile`: `settings` with the image
    the backend gives it (`base.ImageBackend.image_for`); a backend without images keeps
    `settings.image`. Nothing is built: a task with an image of its own (`spec`) keeps
    `settings.image` (None unless `--super-image` names one) until `prepare_task_image` makes
    it, when the task runs."""
    if needs_own_image(settings, spec):
        return settings
    backend = kernel_backend(settings)
    if not isinstance(backend, ImageBackend):
        return settings
    return dataclasses.replace(settings, image=backend.image_for(settings, profile))


def needs_own_image(settings: KernelSettings, spec: ImageSpec | None) -> bool:
    """Whether a task of `spec` runs in an image made for it: it has one and the run's
    `--super-image` (`settings.image`, the run's settings) does not override it."""
    return spec is not None and not settings.image


def prepare_task_image(settings: KernelSettings, spec: ImageSpec) -> KernelSettings:
    """The run's `settings` with the image the task's `spec` describes, made present by the
    backend (`base.TaskImageBackend.prepare_image`). `TaskImageUnsupported` when the backend
    cannot make images."""
    backend = kernel_backend(settings)
    if not isinstance(backend, TaskImageBackend):
        raise TaskImageUnsupported(
            f"the kernel backend {settings.backend!r} cannot make the image this task needs "
            f"(the Dockerfile {spec.dockerfile!r} in {spec.context}): run it with "
            "--super-backend=docker, or give an image for every task with --super-image"
        )
    return dataclasses.replace(settings, image=backend.prepare_image(settings, spec))


def provision_kernel(settings: KernelSettings, *, task_id: str) -> Kernel:
    """Start a fresh kernel for one task with the configured backend; it is ready to execute."""
    return kernel_backend(settings).provision(settings, task_id=task_id)


__all__ = [
    "BACKENDS",
    "ENTRY_POINT_GROUP",
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
    "kernel_backend_class",
    "known_backend_names",
    "needs_own_image",
    "prepare_task_image",
    "provision_kernel",
    "settings_for_task",
]
