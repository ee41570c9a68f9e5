"""`pytest-super report` (the summary table) and `html` (a run's HTML report, or a comparison)."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Container
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_super.cli.parsing import Subparsers
from pytest_super.kernels.jupyter.output import console_text
from pytest_super.paths import shown_path
from pytest_super.safe_read import ForeignDataError

if TYPE_CHECKING:
    from pytest_super.report import TaskRecord


def add_report(sub: Subparsers) -> None:
    """`report FILES`: the summary table."""
    p = sub.add_parser("report", help="the summary table from JUnit XML or results.jsonl files")
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument(
        "--by-task", action="store_true", help="one row per task (e.g. ours next to the paper's)"
    )
    p.set_defaults(func=_report)


def add_html(sub: Subparsers) -> None:
    """`html RUNS`: a run's HTML report, or a comparison of several."""
    p = sub.add_parser(
        "html",
        help="(re)build a run's HTML report; with several runs also a page comparing them",
    )
    p.add_argument("runs", type=Path, nargs="+", help="run folders (reports/<run id>)")
    p.add_argument(
        "--out",
        type=Path,
        help="folder of the comparison page (default: reports/compare-<first>-<last>)",
    )
    p.set_defaults(func=_html)


def _report(args: argparse.Namespace) -> int:
    from pytest_super import report
    from pytest_super.lmr_report import benchmark_tables

    records_of: dict[str, list[TaskRecord]] = {}
    for path in args.files:
        if not os.path.lexists(path):
            print(f"pytest-super report: {path}: no such file", file=sys.stderr)
            return 2
        if path.suffix == ".jsonl":  # a bad line, or a file that is not regular: named, skipped
            records = report.read_results(path, on_bad_line=_warn)
        else:
            try:
                records = report.read_junit(path, on_bad_case=_warn)
            except ForeignDataError as exc:  # not a regular file, too large, not XML
                print(f"pytest-super report: {exc}", file=sys.stderr)
                return 2
        if not records:
            print(f"pytest-super report: {path}: no SUPER task results in it", file=sys.stderr)
            return 2
        records_of[_column_name(path, records, records_of)] = records
    if args.by_task:  # names read from files of other runs: no terminal escapes
        print(console_text(report.format_task_table(records_of)))
    else:  # each benchmark apart: SUPER's table, then LMR-Bench's
        print(console_text(benchmark_tables(records_of, markdown=args.markdown)))
    return 0


def _html(args: argparse.Namespace) -> int:
    from pytest_super import html

    for run_dir in args.runs:
        if not (run_dir / "results.jsonl").is_file():
            print(
                f"pytest-super html: {run_dir}: no results.jsonl in it; name a run folder "
                "such as reports/<run id>",
                file=sys.stderr,
            )
            return 2
    with warnings.catch_warnings(record=True) as caught:  # foreign files named, one a line
        warnings.simplefilter("always")
        if len(args.runs) == 1:
            written = html.write_run_report(args.runs[0])
        else:
            first, last = args.runs[0].resolve(), args.runs[-1].resolve()
            out = args.out or first.parent / f"compare-{first.name}-{last.name}"
            written = html.write_comparison(list(args.runs), out)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    print(shown_path(written))
    return 0


def _warn(message: str) -> None:
    print(f"pytest-super report: warning: {message}", file=sys.stderr)


def _column_name(path: Path, records: list[TaskRecord], taken: Container[str]) -> str:
    agent = str(records[0].properties.get("agent") or "")
    model = str(records[0].properties.get("model") or "")
    name = "/".join(x for x in (agent, model) if x and x != "None") or path.stem
    return name if name not in taken else f"{name}({path.parent.name}/{path.name})"
