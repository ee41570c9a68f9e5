"""The `pytest-super` command: import SUPER's data, report on runs, build the image, clean up.

pytest-super download [--out tasks/super] [--set expert] [--revision COMMIT]
pytest-super download prompts [--out DIR]
pytest-super download lmr-bench [--out lmr-bench]
pytest-super import expert.jsonl --set expert --out tasks/expert/
pytest-super import-trajectories ../super-benchmark/trajectories [--out reports/]
pytest-super import-trajectories lmr-bench [--out reports/]
pytest-super replay-run RUN_FOLDER|RUN.tar.xz [--json OUT] [--prompts FILE] [--expected-requests FILE] [--task ID] [--steps N] [--check-prompts]
pytest-super serve [--run RUN_FOLDER|RUN.tar.xz | --script REPLIES.json] [--agent swe] [--url-file F]
pytest-super report reports/junit.xml other-run.xml
pytest-super html reports/RUN_ID [reports/OTHER_RUN ...] [--out DIR]
pytest-super image build [--base IMAGE] [--tag TAG] [--requirements FILE] [--offline] [--profile colab]
pytest-super image push --registry HOST:PORT [--profile colab] [--tag TAG]
pytest-super image lock
pytest-super cleanup [--run RUN_ID | --all] [--backend NAME] [--executor NAME] [--<cluster address>]
pytest-super ray-node head|worker|stop|status DIR [OPTIONS]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from pytest_super.cli.backends import add_backend_commands
from pytest_super.cli.cleanup import add_cleanup
from pytest_super.cli.data import add_download, add_import, add_import_trajectories
from pytest_super.cli.nodes import add_node_commands
from pytest_super.cli.replay import add_replay_run, add_serve
from pytest_super.cli.reports import add_html, add_report
from pytest_super.errors import SuperError


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func  # the subcommand's set_defaults
    try:
        return func(args)
    except SuperError as exc:
        print(f"pytest-super: {exc}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    """The `pytest-super` command line: one subcommand per `add_*` function of cli/, and the
    kernel backends' own (`add_backend_commands`: Docker's `image`)."""
    parser = argparse.ArgumentParser(prog="pytest-super", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        add_download,
        add_import,
        add_import_trajectories,
        add_replay_run,
        add_serve,
        add_report,
        add_html,
        add_backend_commands,
        add_cleanup,
        add_node_commands,
    ):
        add(sub)
    return parser
