"""`pytest-super cleanup`: what runs left behind, by backend (through the backend contract:
`cleanup_run`, `cleanup_dead_runs`, `kernels.cleanup_all`), here or on every live node of a
cluster."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pytest_super import executors
from pytest_super.cli.parsing import Subparsers, add_executor_arguments, cluster_of
from pytest_super.errors import SuperError
from pytest_super.settings import add_shared_argument, engine_addresses

if TYPE_CHECKING:
    from pytest_super.kernels.base import KernelSettings


def add_cleanup(sub: Subparsers) -> None:
    """`cleanup`: what runs left behind, by backend and executor."""
    p = sub.add_parser(
        "cleanup",
        help="remove what runs whose pytest process is gone left behind (containers, leases)",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--run",
        dest="run_id",
        help="all containers of this run, and the leases its killed processes left",
    )
    which.add_argument(
        "--all",
        action="store_true",
        help="every pytest-super container, of live runs and kept ones too (docker)",
    )
    p.add_argument(
        "--backend",
        default="docker",
        metavar="NAME",
        help="the kernel backend whose leftovers to remove: docker (default), local, an entry "
        "point name or package.module:Class",
    )
    for name in engine_addresses():  # `--docker-host`: the engine to clean up, here
        add_shared_argument(p, name)
    add_executor_arguments(
        p,
        "clean up on every live node of that executor's cluster (default: the cluster whose "
        "address is given or set in the environment, else here; --executor local or "
        "--docker-host: here)",
    )
    p.set_defaults(func=_cleanup)


def _cleanup(args: argparse.Namespace) -> int:
    """What `--backend` left: of one run (`--run`), of runs whose pytest process is gone, or every
    container (`--all`, docker only); here, or on every live node of a cluster: `--executor`'s, or
    the one whose address is given or set in the environment (`cluster_of`)."""
    from pytest_super.kernels.base import KernelSettings

    cluster = cluster_of(args, implied=True)
    if args.all and args.backend != "docker":
        print(
            "pytest-super cleanup: --all is for the docker backend; give --run RUN_ID, or "
            "nothing for the runs whose pytest process is gone",
            file=sys.stderr,
        )
        return 2
    given = {name: getattr(args, name) for name in engine_addresses()}
    settings = KernelSettings(
        backend=args.backend, options={k: v for k, v in given.items() if v is not None}
    )
    if cluster is not None:
        executor, address, source = cluster
        nodes_of = executors.cluster_executor(executor)
        entries = (
            nodes_of.cleanup_on_nodes(address, settings, args.run_id, every=True)
            if args.all
            else nodes_of.cleanup_on_nodes(address, settings, args.run_id)
        )
        said, removed = _cluster_cleaned(executor, address, source, entries)
        print(said)
    else:
        removed = _cleanup_backend(settings, args.run_id, every=args.all)
    print(f"removed {len(removed)} containers" + (": " + ", ".join(removed) if removed else ""))
    return 0


def _cluster_cleaned(
    executor: str, address: str, source: str, entries: list[str]
) -> tuple[str, list[str]]:
    """What `cleanup` did on a cluster (every node it cleaned, and the ones it could not), and
    "node: name" for each container removed."""
    cleaned, missed = executors.read_cleanup_entries(entries)
    said = f"cleaned the {executor} cluster at {address} ({source}): "
    said += (
        ", ".join(f"node {node} ({len(names)} removed)" for node, names in cleaned.items())
        if cleaned
        else "no live node that runs tasks answered"
    )
    said += "; not cleaned: " + ", ".join(missed) if missed else ""
    return said, [f"{node}: {name}" for node, names in cleaned.items() for name in names]


def _cleanup_backend(settings: KernelSettings, run_id: str | None, *, every: bool) -> list[str]:
    """The backend's leftovers here, through its `cleanup_run` (`--run`), `kernels.cleanup_all`
    (`--all`) or `cleanup_dead_runs`."""
    from pytest_super.kernels import cleanup_all, kernel_backend

    try:
        backend = kernel_backend(settings)
    except ValueError as exc:
        raise SuperError(f"cleanup --backend {settings.backend!r}: {exc}") from None
    if every:
        return cleanup_all(settings)
    if run_id:
        return backend.cleanup_run(settings, run_id)
    return backend.cleanup_dead_runs(settings)
