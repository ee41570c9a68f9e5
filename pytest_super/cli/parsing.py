"""What the commands' parsers share: the subparsers' type, and `--executor NAME` with the cluster
a command acts on (`cluster_of`)."""

from __future__ import annotations

import argparse
import os
from typing import TypeAlias

from pytest_super import executors
from pytest_super.errors import SuperError
from pytest_super.kernels.base import Subparsers as Subparsers  # for cli/*: the one alias
from pytest_super.settings import (
    add_shared_argument,
    cluster_addresses,
    engine_addresses,
    resolve_setting_source,
)


def add_executor_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """`--executor NAME` (one whose tasks run on a cluster's nodes), `--<name>` as its short form,
    and each such executor's setting that names its cluster (`--<setting>`: its help and
    metavar)."""
    names = executors.CLUSTER_EXECUTORS
    p.add_argument("--executor", choices=("local", *names), default=None, help=what)
    for name in names:
        p.add_argument(
            f"--{name}",
            dest="executor",
            action="store_const",
            const=name,
            help=f"the same as --executor {name}",
        )
    for setting in dict.fromkeys(cluster_addresses().values()):
        add_shared_argument(p, setting.name)


#: (executor, the cluster's address, where the address came from)
Cluster: TypeAlias = "tuple[str, str, str]"


def cluster_of(args: argparse.Namespace, *, implied: bool) -> Cluster | None:
    """The cluster a command acts on: `--executor NAME`'s; with `implied`, when no executor is
    named and no backend engine's address (`--docker-host`), that of the executor whose cluster
    address is given (`--<setting>`) or set in the environment; None: this machine."""
    addresses = cluster_addresses()
    chosen = args.executor
    engine_given = any(getattr(args, name, None) is not None for name in engine_addresses())
    if chosen is None and implied and not engine_given:
        chosen = next(
            (
                name
                for name, s in addresses.items()
                if getattr(args, s.name, None) is not None
                or any(os.environ.get(var) for var in s.env)
            ),
            None,
        )
    if chosen in (None, "local"):
        return None
    if chosen not in addresses:
        raise SuperError(f"--executor {chosen}: it declares no setting naming its cluster")
    setting = addresses[chosen]
    address, source = resolve_setting_source(setting.name, getattr(args, setting.name, None))
    return chosen, str(address), source
