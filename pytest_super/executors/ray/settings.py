"""The Ray executor's own settings, and how its code reads them from a run.

`SETTINGS` is what `RayExecutor.settings` declares (executors/__init__.py): `--super-ray-address`
(ini `super_ray_address`, else RAY_ADDRESS, else "auto"; also `--ray-address` of `pytest-super
image build` and `cleanup`) and `--super-ray-concurrency`. A run holds their values in
`SuperRun.executor_settings`; the Ray code reads them through `ray_address(run)` and
`ray_concurrency(run)`, and makes the run of a command that acts on the cluster's nodes with
`cluster_run(address, ...)`. Nothing here imports Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, cast

from pytest_super.kernels.base import KernelSettings
from pytest_super.settings import Setting, SuperRun, number_reader
from pytest_super.tasks.model import Bounds

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; typeshed has it for the type checker
    from typing_extensions import Unpack

#: --super-ray-address after RAY_ADDRESS: the cluster this machine belongs to
DEFAULT_ADDRESS = "auto"
#: the most tasks --super-ray-concurrency may keep in flight
CONCURRENCY_BOUNDS = Bounds(1, 100_000, whole=True)

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "ray_address",
        str,
        DEFAULT_ADDRESS,
        f"the Ray cluster for --super-executor=ray (also RAY_ADDRESS; default {DEFAULT_ADDRESS})",
        env=("RAY_ADDRESS",),
        metavar="ADDRESS",
        cluster_address=True,
    ),
    Setting(
        "ray_concurrency",
        number_reader(CONCURRENCY_BOUNDS),
        None,
        "tasks in flight on the Ray cluster at once (default: what the cluster can place)",
        metavar="K",
    ),
)


def ray_address(run: SuperRun) -> str:
    """The cluster's address: --super-ray-address, else RAY_ADDRESS, else "auto"."""
    return str(run.executor_settings.get("ray_address") or DEFAULT_ADDRESS)


def ray_concurrency(run: SuperRun) -> int | None:
    """--super-ray-concurrency: the tasks in flight at once (None: what the cluster can place)."""
    value = run.executor_settings.get("ray_concurrency")
    return None if value is None else int(cast(int, value))


def describe(run: SuperRun) -> str:
    """The report header's words on the executor: the cluster and where its address came from."""
    return f"at {ray_address(run)} ({run.sources.get('ray_address', 'default')})"


def cleanup_options(run: SuperRun) -> str:
    """What `pytest-super cleanup` needs besides `--run ID` to reach the nodes of `run`'s cluster."""
    return f" --executor ray --ray-address {ray_address(run)}"


def cleanup_command(run: SuperRun) -> str:
    """The command that removes what is left of `run` on the cluster's nodes."""
    return (
        f"pytest-super cleanup --executor ray --ray-address {ray_address(run)} "
        f"--backend {run.kernel.backend} --run {run.run_id}"
    )


class RunFields(TypedDict, total=False):
    """What `cluster_run` may set of the run besides the executor's settings."""

    kernel: KernelSettings


def cluster_run(address: str, **fields: Unpack[RunFields]) -> SuperRun:
    """The run of a command that acts on every node of the cluster at `address` (image build,
    cleanup): the Ray executor's, with `fields` (`kernel=...`)."""
    held = {
        s.name: s.read(s.default) if isinstance(s.default, str) else s.default for s in SETTINGS
    }
    return SuperRun(executor="ray", executor_settings={**held, "ray_address": address}, **fields)


def memory_bytes(kernel: KernelSettings) -> int | None:
    """The memory one kernel of `kernel` takes, in bytes, as its backend enforces it
    (`kernels.backend_resources`: Docker reads `--super-mem` as its engine does), for Ray's
    `memory` resource; None when the backend bounds none."""
    from pytest_super.kernels import backend_resources

    return backend_resources(kernel).memory_bytes
