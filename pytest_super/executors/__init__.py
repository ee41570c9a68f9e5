"""Executors: where a task runs, apart from what holds its kernel (the backend, `kernels/`).

`local` (the default) runs each task in this process, or in the xdist worker that collected it;
other executors (a cluster's nodes) run tasks elsewhere and hand their outcomes back to the
pytest process that asked. `--super-executor NAME` (ini `super_executor`) chooses one: a built-in
name, the name of an entry point of the group `pytest_super.executors`, or `package.module:Class`
(registry.py, as agents and backends are found). Built-in names are known without importing them:
every pytest start reads the setting, and a cluster's client library is imported only by a run that
asks for it.

An executor is made once per pytest process, without arguments, and asked:

- `remote`: whether tasks run in other processes than this one (then the plugin makes no kernel
  pool here, xdist is refused, the progress line counts the executor's queue);
- `configure(config)`: check the run's options (a `pytest.UsageError` saying what to change);
- `start(config)`: before any task runs, on the controller (connect, take over the run loop);
  a `pytest.UsageError` when it cannot;
- `outcome(config, run, item)`: for a remote executor, the `(TaskResult, node)` of the task the
  item names, its error raised as the task's error (a local executor is never asked: the plugin runs
  the task here).

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

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pytest_super.registry import Registry

if TYPE_CHECKING:
    from pytest_super.runner import TaskResult

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

_NEEDS = "the attribute `remote` and the methods `configure`, `start` and `outcome` (see Executor)"


@runtime_checkable
class Executor(Protocol):
    """Where tasks run (see the module's docstring). `config` is the pytest config, `run` the
    run's SuperRun, `item` a task's pytest item: typed loosely so this module needs no pytest."""

    remote: bool

    def configure(self, config: Any) -> None: ...

    def start(self, config: Any) -> None: ...

    def outcome(self, config: Any, run: Any, item: Any) -> tuple[TaskResult, str]: ...


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
        self, address: str, settings: Any, run_id: str | None, *, every: bool = False
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
    made = make_executor(spec)
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


def make_executor(spec: str) -> Executor:
    """A new instance of the executor `spec` names; ValueError if it names none, or something
    that is not an executor."""
    made: Executor = _REGISTRY.make(spec, Executor, _NEEDS)
    return made


def declared_settings() -> dict[str, tuple[Any, ...]]:
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


def description(run: Any) -> str:
    """What the executor `run.executor` names says of where it runs the run's tasks (its class's
    `describe(run)`; empty when it has none)."""
    describe = getattr(_REGISTRY.find(run.executor), "describe", None)
    return str(describe(run)) if callable(describe) else ""


def cleanup_options(run: Any) -> str:
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
    "Executor",
    "check_executor_name",
    "cluster_executor",
    "declared_settings",
    "deprecated_backend_message",
    "description",
    "known_executor_names",
    "make_executor",
]
