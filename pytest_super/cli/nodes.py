"""`pytest-super NAME-node head|worker|stop|status DIR`: one node of a cluster executor's cluster,
through the node script the executor ships."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

from pytest_super import executors
from pytest_super.cli.parsing import Subparsers

#: the actions of a `NAME-node` command (executors.NODE_SCRIPTS)
NODE_ACTIONS = ("head", "worker", "stop", "status")


def _node_script(relative: str) -> Path:
    return Path(str(resources.files("pytest_super").joinpath(relative)))


def add_node_commands(sub: Subparsers) -> None:
    """`NAME-node head|worker|stop|status DIR [OPTIONS]`: one node of a cluster executor's
    cluster, for each executor that ships a node script (the script's header is the help)."""
    for name, relative in executors.NODE_SCRIPTS.items():
        script = _node_script(relative)
        header = script.read_text().split("\nset -euo pipefail", 1)[0]
        p = sub.add_parser(
            f"{name}-node",
            help=f"start, stop or inspect one {name} node of a cluster (docs/cluster.md)",
            description="\n".join(line[2:] for line in header.splitlines()[1:]),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("action", choices=NODE_ACTIONS)
        p.add_argument("dir", metavar="DIR", help="the node's own folder")
        p.add_argument("options", nargs=argparse.REMAINDER, help="the action's options (above)")
        p.set_defaults(func=_run_node_script, script=script)


def _run_node_script(args: argparse.Namespace) -> int:
    """Run a node script with bash; its --python defaults to this Python (the environment
    pytest-super, and so the cluster's library, is installed in)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_SUPER_NODE_PROG"}  # its own name
    env["PYTEST_SUPER_NODE_PYTHON"] = sys.executable
    command = ["bash", str(args.script), args.action, args.dir, *args.options]
    return subprocess.run(command, env=env, check=False).returncode
