"""Kernel backends by name, and the one entry point that starts a kernel with the configured one.

A backend (`base.KernelBackend`, whose docstring is the lifecycle contract) owns a kernel's whole
lifecycle: `provision` a kernel for a task, `cleanup_run` what a run left behind,
`cleanup_dead_runs` what runs whose controller died left behind. `docker` (`docker/backend.py`),
`local` (`local.py`) and `replay` (`replay/kernel.py`: a published episode played back) are built
in; others come from the entry-point group `pytest_super.backends` or as `package.module:Class` (`registry.Registry`, as agents do). `kernel_backend` gives the one
`KernelSettings.backend` names, `provision_kernel` starts a kernel with it, `settings_for_task`
asks it for a task's image, `prepare_task_image` has it make the image a task's own files describe
(`base.ImageSpec`: an LMR-Bench folder's Dockerfile).

The contract's optional methods (`base.KernelBackend`'s docstring) are asked through functions
that give a backend lacking one the default: `backend_commands`, `prepare_kernel_image`,
`cleanup_all`, `shutdown_backends`, `backend_resources`, `is_engine_fault`, `engine_problem`,
`node_options` (and `on_node`, a node's settings with them). Nothing here is Docker's, and nothing outside `kernels/docker/` imports Docker's modules (tests/test_layers.py).
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import cast

from pytest_super.kernels.base import (
    BackendResources,
    CommandTools,
    ImageBackend,
    ImageSpec,
    Kernel,
    KernelBackend,
    KernelSettings,
    PreparedImage,
    Subparsers,
    TaskImageBackend,
    TaskImageUnsupported,
    engine_unavailable_in,
)
from pytest_super.registry import Registry, qualified_name

#: the entry-point group third-party backends register under
ENTRY_POINT_GROUP = "pytest_super.backends"

#: the built-in backends by name; each module is imported when its backend is first asked for (the
#: docker backend brings the Docker SDK, which a local run never needs)
BACKENDS: dict[str, str] = {
    "docker": "pytest_super.kernels.docker.backend:DockerBackend",
    "local": "pytest_super.kernels.local:LocalBackend",
    "replay": "pytest_super.replay.kernel:ReplayBackend",
}

#: the built-in backends with commands of their own (`add_commands`): name -> "module:function"
#: adding them, read without importing the backend's own module (a third party's: its class's)
BUILTIN_BACKEND_COMMANDS: dict[str, str] = {
    "docker": "pytest_super.kernels.docker.cli:add_commands",
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


def _optional(backend: KernelBackend, name: str) -> Callable[..., object] | None:
    """The backend's own optional method `name`, or None when it has none."""
    method = getattr(backend, name, None)
    return method if callable(method) else None


def prepare_kernel_image(settings: KernelSettings, profile: str) -> PreparedImage | None:
    """Have the backend make the image a task of image `profile` runs in present (`prepare`),
    with these settings (`settings_for_task`'s); what it did, None when there was nothing to do."""
    backend = kernel_backend(settings)
    prepare = _optional(backend, "prepare")
    prepared = prepare(settings, profile) if prepare is not None else None
    if prepared is not None and not isinstance(prepared, PreparedImage):
        raise TypeError(
            f"{settings.backend}: prepare() returned {prepared!r}, not a PreparedImage or None"
        )
    return prepared


def cleanup_all(settings: KernelSettings) -> list[str]:
    """Everything of the backend's it finds, live runs' included (`cleanup_all`; without it:
    `cleanup_dead_runs`); the names removed."""
    backend = kernel_backend(settings)
    method = _optional(backend, "cleanup_all")
    removed = (
        cast("Iterable[object]", method(settings))
        if method is not None
        else backend.cleanup_dead_runs(settings)
    )
    return [str(name) for name in removed]


def shutdown_backends() -> None:
    """Shut down every backend instance this process made (`shutdown`), at the process's end; a
    backend that fails to is a warning, the others still shut down."""
    with _instances_lock:
        made = list(_instances.items())
    for name, backend in made:
        shutdown = _optional(backend, "shutdown")
        if shutdown is None:
            continue
        try:
            shutdown()
        except Exception as exc:  # noqa: BLE001 - the process is ending: say it, go on
            warnings.warn(
                f"pytest-super: the kernel backend {name!r} failed to shut down: {exc}",
                stacklevel=2,
            )


def backend_resources(settings: KernelSettings) -> BackendResources:
    """What one kernel of `settings` takes and where it runs (`describe`; without it: nothing
    declared)."""
    backend = kernel_backend(settings)
    describe = _optional(backend, "describe")
    described = describe(settings) if describe is not None else BackendResources()
    if not isinstance(described, BackendResources):
        raise TypeError(
            f"{settings.backend}: describe() returned {described!r}, not a BackendResources"
        )
    return described


def is_engine_fault(settings: KernelSettings, exc: BaseException) -> bool:
    """Whether `exc` is the backend's engine failing rather than the task (`is_engine_fault`;
    without it: an `EngineUnavailable` among its causes)."""
    method = _optional(kernel_backend(settings), "is_engine_fault")
    return bool(method(exc)) if method is not None else engine_unavailable_in(exc)


def engine_problem(settings: KernelSettings) -> str:
    """Why the backend's engine does not answer now; "" when it does, or the backend has no
    engine to ask (`engine_problem`)."""
    method = _optional(kernel_backend(settings), "engine_problem")
    return str(method(settings) or "") if method is not None else ""


def node_options(settings: KernelSettings) -> dict[str, object]:
    """The backend's options a process on another machine (a Ray node) needs from this one, to
    add to its `KernelSettings.options` there (`node_options`; without it: none)."""
    method = _optional(kernel_backend(settings), "node_options")
    given = method(settings) if method is not None else {}
    if not isinstance(given, dict):
        raise TypeError(f"{settings.backend}: node_options() returned {given!r}, not a dict")
    return given


def backend_commands() -> list[tuple[str, Callable[[Subparsers, CommandTools], None]]]:
    """Each known backend's `add_commands`, by backend, built-in ones first: a built-in one's
    from `BUILTIN_BACKEND_COMMANDS`, a third party's from its class (one that does not load, or
    has none, adds nothing: choosing it says why)."""
    found: list[tuple[str, Callable[[Subparsers, CommandTools], None]]] = []
    for name in known_backend_names():
        if name in BACKENDS:
            where = BUILTIN_BACKEND_COMMANDS.get(name)
            if where is not None:
                module, _, attribute = where.partition(":")
                found.append((name, getattr(importlib.import_module(module), attribute)))
            continue
        try:
            cls = kernel_backend_class(name)
        except ValueError:
            continue
        add = getattr(cls, "add_commands", None)
        if callable(add):
            found.append((name, add))
    return found


def on_node(settings: KernelSettings) -> KernelSettings:
    """The run's `settings` as a process on another machine (a Ray node) uses them when the
    controller gave it nothing: their options updated with what the backend gives there
    (`node_options`), so that what means the controller's machine only (Docker's engine address)
    means that machine's own."""
    return dataclasses.replace(settings, options={**settings.options, **node_options(settings)})


__all__ = [
    "BACKENDS",
    "BUILTIN_BACKEND_COMMANDS",
    "ENTRY_POINT_GROUP",
    "backend_commands",
    "backend_resources",
    "cleanup_all",
    "engine_problem",
    "is_engine_fault",
    "kernel_backend",
    "kernel_backend_class",
    "known_backend_names",
    "needs_own_image",
    "node_options",
    "on_node",
    "prepare_kernel_image",
    "prepare_task_image",
    "provision_kernel",
    "settings_for_task",
    "shutdown_backends",
]
