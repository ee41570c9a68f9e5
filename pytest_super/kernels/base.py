"""The kernel interface: one Jupyter kernel that runs notebook cells for one task.

A backend (`KernelBackend`: docker, local, or a third party's) provisions a kernel and returns an
object that satisfies `Kernel`, and removes what runs left behind; its docstring is the lifecycle
contract. Provisioning (starting a box) and running cells in it are different jobs: see
`docker/backend.py` and `local.py` for the former, `jupyter/runtime.py` for the latter (a backend
whose box runs ipykernel can hand its box to `runtime.JupyterKernel` and get a `Kernel`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from pytest_super import defaults
from pytest_super.errors import EngineUnavailable, InfrastructureError

CellStatus = Literal["ok", "error", "timeout", "died"]


@dataclass
class CellResult:
    """What one cell produced.

    `output` is the raw text (stream, execute_result and display_data text/plain, errors as
    `ename: evalue` plus traceback), ANSI codes kept: landmarks are matched against it.
    `status` is "timeout" when the timeout expired; then `still_running` says whether the cell
    is still running (execute(..., interrupt_on_timeout=False)) or was interrupted.
    "died" means the kernel process died during the cell; the kernel has been restarted.
    """

    output: str
    status: CellStatus
    duration_s: float
    truncated: bool = False
    still_running: bool = False


@dataclass
class ToolResult:
    """What one of the agents' tools (the edit tool, SWE-agent's file viewer) answered, and how
    long it took: its time counts against the compute limit, as a cell's does."""

    observation: str
    ok: bool
    duration_s: float


@runtime_checkable
class ToolKernel(Protocol):
    """A kernel that answers the agents' tools itself instead of having them read and write its
    files (the replay backend answers with the episode's recorded observation and duration).
    `run_tool` returns None for a tool it leaves to the real implementation."""

    def run_tool(self, action: str, content: str) -> ToolResult | None: ...


@dataclass
class KernelSettings:
    """How to provision kernels; built once per run from the pytest options.

    `backend` names the backend (`kernels.kernel_backend`): a built-in name (docker, local), the
    name of an entry point of the group `pytest_super.backends`, or `package.module:Class`. The
    other fields are what a backend is told, whatever the backend; each reads those that apply to
    it (the docker backend all of them, the local one `git_mirrors`, `output_cap_bytes` and
    `startup_timeout_s`). A backend's own settings (Docker's engine address, pip cache, pids
    limit, channel) are in `options`, by name, and only that backend reads them.
    """

    backend: str = "docker"
    image: str | None = None  # None: the default image of `pytest-super image build`
    mem: str = defaults.MEM
    cpus: float = defaults.CPUS
    network: Literal["bridge", "none"] = defaults.NETWORK
    git_mirrors: dict[str, str] = field(default_factory=dict)  # URL prefix -> host directory
    #: bound on what one box may write (bytes); None: unbounded. See docs/security.md.
    disk_bytes: int | None = None
    run_id: str = "adhoc"
    worker: str = "main"
    output_cap_bytes: int = 10_000_000
    startup_timeout_s: float = 60.0
    #: the backend's own settings by name (those it declares), read by the backend alone (the
    #: docker backend: `kernels/docker/settings.py`)
    options: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class BackendSetting:
    """A setting a backend declares for itself (as executors declare theirs): `--super-<name>`,
    ini `super_<name>`, `SuperRun.resolve(<name>=...)`; its value (`read` from the text, else
    `default`) reaches the backend in `KernelSettings.options[name]` when the run uses it. The
    settings package turns each into one of its `Setting`s (settings/providers.py).

    `engine_address`: the value is the address of the backend's engine (a URL that may carry
    credentials): they are kept out of everything written, the report header shows it masked,
    and `pytest-super cleanup` takes it as `--<name>` (then it cleans up here, not on a cluster).
    `untrusted`: when not empty, the value is dropped for a run whose agent is not trusted (task
    code could poison what the value shares between tasks), and this message says so
    (`{value}`, `{agent}` filled in)."""

    name: str
    read: Callable[[str], object]
    default: object
    help: str
    metavar: str | None = None
    engine_address: bool = False
    untrusted: str = ""


@runtime_checkable
class Kernel(Protocol):
    """One live Jupyter kernel. Cells have IPython semantics (`!cmd`, `%cd`, `%%writefile`)."""

    @property
    def description(self) -> str:
        """A short human description, e.g. "docker container super-foo-gw0 (abc123)"."""
        ...

    def execute(
        self, code: str, timeout: float, *, interrupt_on_timeout: bool = True
    ) -> CellResult:
        """Run one cell. On timeout, interrupt it (default) or leave it running."""
        ...

    def wait(self, timeout: float) -> CellResult:
        """Keep collecting the output of a cell left running by a timeout (`continue_wait`)."""
        ...

    def interrupt(self) -> CellResult:
        """Interrupt the running cell and return the rest of its output. State survives."""
        ...

    def restart(self) -> None:
        """Restart the kernel process (state is lost, the box and its files stay)."""
        ...

    def read_file(self, path: str) -> str:
        """Read a text file, relative paths resolved against the kernel's current directory."""
        ...

    def write_file(self, path: str, text: str) -> None:
        """Write a text file, relative paths resolved against the kernel's current directory."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """Read a file's bytes, relative paths resolved against the kernel's current directory."""
        ...

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a file's bytes, relative paths resolved against the kernel's current directory."""
        ...

    def check_limits(self) -> None:
        """Measure the kernel's box against its limits now (the disk, when watched); raise the
        `EpisodeEnd` of a limit it went over (`DiskLimitExceeded`). The runner calls it when an
        episode ends: a limit watched in the background may not have been measured since."""
        ...

    def is_alive(self) -> bool:
        """Is the kernel process still running in its box? (One engine call: the pool asks it of
        a kernel made ahead before handing it to its task.)"""
        ...

    def detach(self) -> str:
        """Stop talking to the kernel but leave its box running (`--super-keep`).

        Returns how a person gets in: the `docker exec` command and the connection file for
        `jupyter console --existing`.
        """
        ...

    def close(self) -> None:
        """Shut the kernel down and remove its box.

        When it returns, the box is gone (the pool frees the kernel's `--super-max-containers`
        slot then). Safe to call twice, and after `detach` (then it does nothing). It may be called
        on a thread other than the one that made the kernel (the pool's reaper), after any
        failure of the kernel (a dead process, a cell left running). If the box cannot be removed,
        it raises (`InfrastructureError`); the box must then still be one that `cleanup_run` of
        its run finds, which the controller calls at the end.
        """
        ...


@runtime_checkable
class KernelBackend(Protocol):
    """One way of running kernels, with its whole lifecycle (as inspect_ai's sandbox providers):
    provisioning a kernel for a task, and removing what runs left behind.

    **Finding one.** `--super-backend` (`KernelSettings.backend`) names it: `docker` or `local`,
    the name of an entry point of the group `pytest_super.backends`, or `package.module:Class`.
    The class is imported and checked when the options are read. Each process (the controller,
    each xdist worker; the one process without xdist) makes one instance, without arguments, the
    first time it needs one, and keeps it for the process's life: the constructor must be cheap
    and reach nothing (no engine connection); what the process's kernels share may live on it.
    What a backend is told comes in `KernelSettings`, passed to every call.

    **What is called, when, by which process.**

    - Per run, on the controller (the process that is not an xdist worker):
      `cleanup_dead_runs(settings)` when the session starts, before any task runs;
      `cleanup_run(settings, settings.run_id)` when it ends, after every worker finished and the
      workers' kernels were closed (skipped under `--super-keep`).
    - Per task, on the process that runs it (an xdist worker under `-n`): `provision(settings,
      task_id=...)`, then the kernel's methods (`Kernel`), then `Kernel.close()`, or
      `Kernel.detach()` under `--super-keep` when the task failed. One task may provision
      several kernels: each Reflexion attempt, a retry (`--super-retries`), a kernel replaced
      after it broke; the one before is closed first.
    - At clean-up: whatever ended the session (Ctrl-C, a failure), each process closes the kernels
      it made before the controller's `cleanup_run`. Kernels of a process killed with SIGKILL are
      never closed: `cleanup_run` at the controller's end removes them; if the controller itself
      was killed, the next run's `cleanup_dead_runs` does.

    **Threads and processes.** Several processes provision at once (the workers of one run, other
    runs). `provision` may run on a background thread (the kernel pool makes the next task's
    kernel while the current task uses its own) and a kernel may be closed on a thread other than
    the one that made it (the pool's reaper): the backend's methods must be thread-safe. One
    kernel's other methods are called by one thread at a time.

    **Errors** (`pytest_super.errors`). `InfrastructureError` when the backend cannot do its job:
    the task is a pytest error, retried under `--super-retries` when the error is `retryable`. Its
    subclasses say more: `EngineUnavailable` (nothing answers at the backend's address),
    `ImageMissing` (the kernel image does not exist; not retried), `KernelStartError` (the kernel
    started but never became ready). Any other exception is a bug: the task errors, not retried.
    The controller goes on when `cleanup_dead_runs` raises `InfrastructureError` (each task then
    meets the fault itself) and when `cleanup_run` raises `EngineUnavailable`; any other
    `InfrastructureError` of `cleanup_run` becomes a warning (the run's reports are written).

    **Checking one.** `pytest --pyargs pytest_super.conformance --super-backend NAME` runs the
    behaviour tests every backend must pass (docs/backends.md). What a backend cannot do, it
    declares in a class attribute `unsupported = {capability: reason}` (`CAPABILITIES`): those
    tests are skipped with the reason.

    **Kernels made ahead.** A backend whose kernels may be made ahead of the task that uses them
    (the kernel pool warms the next task's kernel while the current one runs) says so in a class
    attribute `warm_pool = True`; without it (or `False`) kernels start when a task asks for one.

    **Optional methods** (`BackendBase` has each with its default; a backend without one gets the
    default, through the module functions of `pytest_super.kernels` the rest of the code calls):

    - `prepare(settings, profile) -> PreparedImage | None`: make the image (or environment) a
      task of image profile `profile` runs in present, before its deadline starts (a build or a
      pull, under a lock the backend's processes on one machine share: others wait, then find it
      made); what was done, None when nothing was to be done. Called on the process that runs
      the task (a Ray node, before the task's episode). Default: nothing (`kernels.prepare_kernel_image`).
    - `cleanup_all(settings) -> list[str]`: remove everything of the backend's it finds, live
      runs' included (`pytest-super cleanup --all`); the names removed. Default:
      `cleanup_dead_runs` (`kernels.cleanup_all`).
    - `shutdown() -> None`: at the end of the process that made the instance (`pytest_unconfigure`,
      a node's end), release what the instance holds for the process's life (Docker: its leases).
      Safe to call twice; after it no kernel of the process is used. Default: nothing
      (`kernels.shutdown_backends`, for every instance this process made).
    - `describe(settings) -> BackendResources`: what one kernel of these settings takes and where
      it runs (an executor reserves that much for each task). Default: nothing declared
      (`kernels.backend_resources`).
    - `is_engine_fault(exc) -> bool`: whether `exc` (or an error it came from) is the backend's
      engine failing, not the task (a Ray node then gives the task to another node). Default:
      an `EngineUnavailable` among its causes (`kernels.is_engine_fault`).
    - `engine_problem(settings) -> str`: why the engine does not answer now, "" when it does (a
      health check after an error whose cause is unclear). Default: "" (`kernels.engine_problem`).
    - `node_options(settings) -> dict[str, object]`: what a process on another machine (a Ray node)
      needs from this one to run the backend's kernels, added to the settings' `options` there
      (Docker: the images this machine trusts; its engine address reset, for the node's own).
      Default: {} (`kernels.node_options`).
    - `add_commands(subparsers, tools)` (a classmethod: no instance is made): add the backend's
      own `pytest-super` subcommands to the `add_subparsers()` of the command (Docker: `image
      build|push|lock`); `tools` (`CommandTools`) gives it the options of its settings and the
      cluster a command acts on. A subcommand's `func` (`set_defaults`) takes the parsed
      arguments and returns the exit status. A built-in backend's is found without importing
      the backend (`kernels.BUILTIN_BACKEND_COMMANDS`), a third party's on its class. Default:
      none (`kernels.backend_commands`).
    """

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        """Start a fresh kernel for one task (`task_id`: the item's name); it is ready to execute.

        Its box must be found by `cleanup_run(settings.run_id)` from the moment it exists (mark it
        with the run id, e.g. a label) until it is closed, and, once its controller is dead, by
        `cleanup_dead_runs`. If provisioning fails, or is interrupted (Ctrl-C, pytest-timeout),
        it removes what it made before raising. Raises `InfrastructureError` (and its
        subclasses, above)."""
        ...

    def cleanup_run(self, settings: KernelSettings, run_id: str) -> list[str]:
        """Remove what run `run_id` left behind (the boxes of killed workers, a warm kernel no
        task took); return their names. A box `Kernel.detach` kept is not removed. Raises
        `EngineUnavailable` if nothing answers, `InfrastructureError` if removing failed."""
        ...

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        """Remove what runs whose controller died left behind (never a live run's, of this host or
        another, nor a kept box); return the names removed. Raises `InfrastructureError` if the
        backend cannot be reached. A backend whose boxes die with their process returns []."""
        ...


#: what `add_subparsers()` returns: where a backend adds its subcommands
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class NodeImages(Protocol):
    """What a backend's command may ask of a cluster's executor (`executors.ClusterExecutor`)."""

    def build_on_nodes(
        self, address: str, *, profile: str, base: str | None, offline: bool, tag: str | None
    ) -> list[tuple[str, str]]:
        """The kernel image built on each node's engine: (node, tag) for each."""
        ...


class CommandTools(Protocol):
    """What the `pytest-super` command gives a backend's `add_commands` (the settings and the
    executors are above the kernels: a backend cannot import them)."""

    def add_setting_argument(self, parser: argparse.ArgumentParser, name: str) -> None:
        """`--<name>` for the setting `name` (a backend's own too), with its help and metavar."""
        ...

    def add_cluster_arguments(self, parser: argparse.ArgumentParser, what: str) -> None:
        """`--executor NAME` (`what`: its help) and each cluster executor's address option."""
        ...

    def cluster(self, args: argparse.Namespace) -> tuple[NodeImages, str] | None:
        """The cluster a command acts on (`--executor`, an address given): its executor, whose
        `build_on_nodes` and `cleanup_on_nodes` act on every live node, and its address; None:
        this machine."""
        ...


@dataclass(frozen=True)
class PreparedImage:
    """What `prepare` did for a task's image: `how` is "present" (there already, or made meanwhile
    by another process), "pulled", "built" or "missing" (not there and not ours to make: the
    kernel's start says so); `seconds` what it took; `note` what went wrong on the way and was
    worked around (a pull that failed, then a build), for the run to say once."""

    image: str
    how: Literal["present", "pulled", "built", "missing"]
    seconds: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class BackendResources:
    """What one kernel takes and where it runs (`describe`): `memory_bytes` and `cpus` the bounds
    the backend enforces on it (None: none enforced), `where` a short description of the place
    (an engine's address, this machine) for messages."""

    memory_bytes: int | None = None
    cpus: float | None = None
    where: str = ""


def engine_unavailable_in(exc: BaseException) -> bool:
    """Whether `exc` or an error it came from (`__cause__`, `__context__`) is `EngineUnavailable`:
    the default `is_engine_fault`."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, EngineUnavailable):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


class BackendBase:
    """A base for backends: the optional methods of `KernelBackend`'s contract with their defaults
    (a subclass still defines `provision`, `cleanup_run` and `cleanup_dead_runs`). A backend need
    not derive from it: `pytest_super.kernels` gives the same defaults to one that lacks them."""

    #: kernels start when a task asks for one (`KernelBackend`'s "Kernels made ahead")
    warm_pool = False

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        raise NotImplementedError  # pragma: no cover - each backend defines it

    def prepare(self, settings: KernelSettings, profile: str) -> PreparedImage | None:
        """Nothing to make: kernels need no image prepared."""
        return None

    def cleanup_all(self, settings: KernelSettings) -> list[str]:
        """What the backend can tell is left: `cleanup_dead_runs`."""
        return self.cleanup_dead_runs(settings)

    def shutdown(self) -> None:
        """Nothing held for the process's life."""

    def describe(self, settings: KernelSettings) -> BackendResources:
        """No bound enforced on a kernel."""
        return BackendResources(where=settings.backend)

    def is_engine_fault(self, exc: BaseException) -> bool:
        return engine_unavailable_in(exc)

    def engine_problem(self, settings: KernelSettings) -> str:
        """No engine to ask."""
        return ""

    @classmethod
    def add_commands(cls, subparsers: Subparsers, tools: CommandTools) -> None:
        """No subcommands of its own."""

    def node_options(self, settings: KernelSettings) -> dict[str, object]:
        """Nothing another machine needs from this one."""
        return {}


@runtime_checkable
class ImageBackend(Protocol):
    """A backend whose kernels run in an image or environment a task names (its `image:` profile,
    e.g. `default`, `colab`). Optional: a backend without `image_for` leaves `settings.image`
    as the run gave it (`--super-image`, or None). The docker backend's answer is the tag of the
    profile's image (`pytest-super image build --profile P`), unless `--super-image` overrides it.
    """

    def image_for(self, settings: KernelSettings, profile: str) -> str | None:
        """The image (or environment) a kernel for a task of `profile` runs in, as the task's
        results record it (`super.image`); `settings.image` is the run's `--super-image`."""
        ...


@dataclass(frozen=True)
class ImageSpec:
    """The image one task needs built for itself (an LMR-Bench folder's Dockerfile), in neutral
    terms: a backend that runs kernels in images builds it (`TaskImageBackend.prepare_image`).

    `context` is the build context folder (absolute); `dockerfile` its Dockerfile, relative to
    it; `build_args` the build arguments, in order; `exclude` top-level paths of the context
    that are never sent to the build (the golden files, which must never be in the box)."""

    context: str
    dockerfile: str = "Dockerfile"
    build_args: tuple[tuple[str, str], ...] = ()
    exclude: tuple[str, ...] = ()


class TaskImageUnsupported(InfrastructureError):
    """A task needs an image of its own (`ImageSpec`) and the run's backend cannot make one;
    running it again would not help."""

    retryable = False


@runtime_checkable
class TaskImageBackend(Protocol):
    """A backend that can run a task in the image the task's own files describe (`ImageSpec`).
    Optional: a task that needs one, on a backend without `prepare_image`, is an error that says
    so (a backend may also implement it to refuse with its own reason). `--super-image`
    overrides it: then `prepare_image` is not called and the task runs in the run's image."""

    def prepare_image(self, settings: KernelSettings, spec: ImageSpec) -> str:
        """Make the task's image present and return its name, as the task's results record it
        (`super.image`); the kernel of `dataclasses.replace(settings, image=name)` runs in it,
        in a kernel of this harness. Build once per run, cache by the content of what goes into
        it. Raises `InfrastructureError`: `EnvironmentFault` when the task's own environment
        cannot be made (a base image the engine cannot get, a build step that fails), naming
        the cause."""
        ...


#: what the conformance suite (`pytest --pyargs pytest_super.conformance --super-backend NAME`)
#: asks of a backend, by name. A backend that cannot do one declares it in a class attribute
#: `unsupported: dict[str, str]` (capability -> why); the suite skips the tests that need it with
#: that reason. Without the attribute, a backend claims every capability.
CAPABILITIES: dict[str, str] = {
    "code": "runs any cell it is sent and returns its output (stdout, stderr, rich, errors)",
    "timeout": "stops a cell at its timeout (or leaves it running for `wait`), keeping state",
    "interrupt": "interrupts a running cell, keeping state",
    "death": "reports a kernel process that died (`died`, `is_alive()` false) and starts anew",
    "restart": "restarts the kernel process: variables are lost, files are kept",
    "files": "reads and writes files (text and bytes) relative to the kernel's directory",
    "leftovers": "`cleanup_run` finds and removes a kernel of the run that was never closed",
}


def warms_ahead(backend: object) -> bool:
    """Whether `backend` (a class or an instance) lets its kernels be made ahead of the task that
    uses them (its class attribute `warm_pool`; absent means no)."""
    return getattr(backend, "warm_pool", False) is True


def unsupported_capabilities(backend: object) -> dict[str, str]:
    """What `backend` (a class or an instance) declares it cannot do: capability -> reason.
    ValueError for a name not in `CAPABILITIES` or an empty reason (a skip must say why)."""
    declared = getattr(backend, "unsupported", None) or {}
    owner = backend if isinstance(backend, type) else type(backend)
    where = f"{owner.__module__}.{owner.__qualname__}.unsupported"
    if not isinstance(declared, dict):
        raise ValueError(f"{where}: expected a dict of capability -> reason, got {declared!r}")
    for name, reason in declared.items():
        if name not in CAPABILITIES:
            raise ValueError(
                f"{where}: unknown capability {name!r}; known: {', '.join(CAPABILITIES)}"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"{where}[{name!r}]: give the reason it is not supported")
    return dict(declared)


def console_command(connection_file: str) -> str:
    """The command that opens a console on a kept kernel: the `jupyter` of this Python's
    environment (jupyter_console is a dependency), so it works whichever venv is active."""
    jupyter = Path(sys.executable).parent / "jupyter"
    program = str(jupyter) if jupyter.exists() else "jupyter"
    return f"{program} console --existing {connection_file}"
