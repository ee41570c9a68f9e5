"""Executors: where a task runs, apart from what holds its kernel (the backend, `kernels/`).

`local` (the default) runs each task in this process, or in the xdist worker that collected it;
other executors (a cluster's nodes) run tasks elsewhere and hand their outcomes back to the
pytest process that asked. `--super-executor NAME` (ini `super_executor`) chooses one: a built-in
name, the name of an entry point of the group `pytest_super.executors`, or `package.module:Class`
(registry.py, as agents and backends are found). Built-in names are known without importing them:
every pytest start reads the setting, and a cluster's client library is imported only by a run that
asks for it.

An executor (`Executor`, executors/base.py) is made without arguments (once per pytest process,
once per `run_tasks`) and knows nothing of pytest (SWE-ReX's split: where a task runs, apart from
what runs it):

- `remote`: whether tasks run in other processes than this one (then a pytest run keeps one
  process: xdist is refused, the progress line counts the executor's queue);
- `start(run)`: before any task, in the process that submits them (connect; clear what dead
  runs left); an `InfrastructureError` (or, for a cluster, its own error) when it cannot;
- `submit(task, run, *, name, deadline_s, on_step)`: run the task (its item `name`) within
  `deadline_s`, each step shown to `on_step`; a `concurrent.futures.Future` of its
  `TaskOutcome` (outcome.py). An exception that is no task's outcome (Ctrl-C, a bug of ours)
  is the future's, or for an executor that runs the task at once, raised by `submit`;
- `stop()`: this process takes no more tasks (a warm kernel goes); what could not be removed;
- `cleanup(run)`: what the run's tasks left, wherever they ran, removed (unless
  `run.settings.keep_failed`), and the executor's connection ended; an `InfrastructureError`
  saying what is left and the command that removes it.

`pytest_loop` names ("package.module:function", "" for none) the pytest side of an executor
that runs tasks elsewhere: `function(config, run, executor)` starts it and takes over pytest's
run-test loop (executors/pytest_side.py calls it; the Ray executor's is
executors/ray/pytest_loop.py). An executor without one has its tasks submitted one by one by
the `super_result` fixture.

An executor may also declare, as attributes of its class (read without making one, and without
importing a cluster's client library, so the class's module must not import it):

- `settings`: its own settings, a tuple of `pytest_super.settings.Setting` (`--super-<name>`, ini
  `super_<name>`, environment variables, default); the run holds their values in
  `SuperRun.executor_settings` and the executor's code reads them from there. One marked
  `cluster_address` names its cluster for `pytest-super image build` and `cleanup`;
- `describe(run)`: a few words on where it runs the tasks, for the report header ("at HOST:PORT
  (environment variable RAY_ADDRESS)").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pytest_super.registry import Registry

if TYPE_CHECKING:
    from pytest_super.kernels.base import KernelSettings

#: the entry-point group third-party executors register under
ENTRY_POINT_GROUP = "pytest_super.executors"

#: built-in executors, imported only when chosen
EXECUTORS: dict[str, str] = {
    "local": "pytest_super.executors.local:LocalExecutor",
    "ray": "pytest_super.executors.ray:RayExecutor",
}

#: the built-in executors whose tasks run on a cluster's nodes (`pytest-super image build` and
#: `cleanup` act on every live node of theirs: `--executor NAME`)
CLUSTER_EXECUTORS: tuple[str, ...] = tuple(name for name in EXECUTORS if name != "local")

#: the node script a built-in cluster executor ships (a file of the package, so a wheel has it):
#: `pytest-super NAME-node ACTION DIR [OPTIONS]` runs it with bash, the script's header its help
NODE_SCRIPTS: dict[str, str] = {"ray": "executors/ray/ray-node.sh"}

#: `--super-backend` values that name an executor instead (deprecated): backend value ->
#: (executor, the kernel backend the executor's tasks then use)
BACKEND_ALIASES: dict[str, tuple[str, str]] = {"ray": ("ray", "docker")}

_REGISTRY = Registry(
    kind="executor", plural="executors", group=ENTRY_POINT_GROUP, builtins=EXECUTORS
)


class NamesExecutor(Protocol):
    """A run (`settings.SuperRun`) as `described` and `cleanup_options` read it: the executor's
    name (the executor's class is handed the run itself)."""

    @property
    def executor(self) -> str: ...


@runtime_checkable
class ClusterExecutor(Protocol):
    """An executor whose tasks run on a cluster's nodes, and what the `pytest-super` command asks
    of it on every live node: `address` is the cluster's (the value of its setting marked
    `cluster_address`: `--ray-address`, RAY_ADDRESS)."""

    def build_on_nodes(
        self, address: str, *, profile: str, base: str | None, offline: bool, tag: str | None
    ) -> list[tuple[str, str]]:
        """The kernel image built on each node's engine: (node, tag) for each."""
        ...

    def cleanup_on_nodes(
        self, address: str, settings: KernelSettings, run_id: str | None, *, every: bool = False
    ) -> list[str]:
        """What the backend of `settings` (KernelSettings) left on each node: of run `run_id`,
        else of runs whose controller died (`every`: everything of ours there, as `pytest-super
        cleanup --all`); "node: name" for each thing removed, "node:" for a node that was
        cleaned and had nothing left, "node: (why)" in parentheses for one not cleaned."""
        ...


def read_cleanup_entries(entries: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """`ClusterExecutor.cleanup_on_nodes`'s entries read: {node: names removed there} for every
    node cleaned (in order), and "node (why)" for each node not cleaned."""
    cleaned: dict[str, list[str]] = {}
    missed = []
    for entry in entries:
        node, _, what = entry.partition(":")
        what = what.strip()
        if what.startswith("("):
            missed.append(f"{node} {what}")
        else:
            cleaned.setdefault(node, []).extend([what] if what else [])
    return cleaned, missed


def cluster_executor(spec: str) -> ClusterExecutor:
    """The executor `spec` names, as one that runs tasks on a cluster's nodes; ValueError if it
    names none, or one that does not."""
    made = _REGISTRY.find(spec)()
    if not isinstance(made, ClusterExecutor):
        raise ValueError(
            f"executor {spec!r} runs no tasks on a cluster's nodes (it has no `build_on_nodes` "
            "and `cleanup_on_nodes`)"
        )
    return made


def known_executor_names() -> list[str]:
    """Built-in names, then the names registered under the `pytest_super.executors` group."""
    return _REGISTRY.known_names()


def check_executor_name(spec: str) -> str:
    """`spec` if it names an executor; ValueError naming the known ones otherwise. A built-in name
    is accepted without importing it."""
    if spec not in EXECUTORS:
        _REGISTRY.find(spec)
    return spec


def declared_settings() -> dict[str, tuple[object, ...]]:
    """The `settings` each known executor's class declares, by name (executors declaring none
    left out). A third-party executor that does not load declares nothing here: choosing it says
    why (`check_executor_name`)."""
    declared = {}
    for name in known_executor_names():
        try:
            cls = _REGISTRY.find(name)
        except ValueError:
            continue
        table = tuple(getattr(cls, "settings", ()) or ())
        if table:
            declared[name] = table
    return declared


def described(run: NamesExecutor) -> str:
    """Where the executor `run.executor` names runs the run's tasks, for the report header:
    empty for one that runs them in this process (its class's `remote` false), else "executor
    NAME" and what its class's `describe(run)` says, if it has one."""
    cls = _REGISTRY.find(run.executor)
    if not getattr(cls, "remote", False):
        return ""
    describe = getattr(cls, "describe", None)
    said = str(describe(run)) if callable(describe) else ""
    return f"executor {run.executor}" + (f" {said}" if said else "")


def cleanup_options(run: NamesExecutor) -> str:
    """What `pytest-super cleanup --run ID` needs besides to reach where the executor
    `run.executor` names ran the run's tasks (its class's `cleanup_options(run)`; empty for this
    machine)."""
    options = getattr(_REGISTRY.find(run.executor), "cleanup_options", None)
    return str(options(run)) if callable(options) else ""


def deprecated_backend_message(backend: str) -> str:
    """The warning for `--super-backend=<an executor's alias>`."""
    executor, kernel_backend = BACKEND_ALIASES[backend]
    return (
        f"--super-backend={backend} is deprecated: use --super-executor={executor} (tasks run with "
        f"the {kernel_backend} backend there; ini super_executor = {executor})"
    )


__all__ = [
    "BACKEND_ALIASES",
    "CLUSTER_EXECUTORS",
    "NODE_SCRIPTS",
    "ClusterExecutor",
    "ENTRY_POINT_GROUP",
    "EXECUTORS",
    "check_executor_name",
    "cluster_executor",
    "declared_settings",
    "deprecated_backend_message",
    "described",
    "known_executor_names",
]
