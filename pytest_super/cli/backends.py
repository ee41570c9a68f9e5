"""The kernel backends' own subcommands (`add_commands` of the backend contract, Docker's `image
build|push|lock`), added to the `pytest-super` command with what they need of it (`Tools`: the
settings' options and the cluster a command acts on), whatever the backend."""

from __future__ import annotations

import argparse

from pytest_super import executors, kernels
from pytest_super.cli.parsing import Subparsers, add_executor_arguments, cluster_of
from pytest_super.kernels.base import NodeImages
from pytest_super.settings import add_shared_argument


class Tools:
    """`kernels.base.CommandTools` for the `pytest-super` command."""

    def add_setting_argument(self, parser: argparse.ArgumentParser, name: str) -> None:
        add_shared_argument(parser, name)

    def add_cluster_arguments(self, parser: argparse.ArgumentParser, what: str) -> None:
        add_executor_arguments(parser, what)

    def cluster(self, args: argparse.Namespace) -> tuple[NodeImages, str] | None:
        found = cluster_of(args, implied=False)
        if found is None:
            return None
        executor, address, _source = found
        return executors.cluster_executor(executor), address


def add_backend_commands(sub: Subparsers) -> None:
    """Every known backend's subcommands (`kernels.backend_commands`)."""
    tools = Tools()
    for _name, add in kernels.backend_commands():
        add(sub, tools)
