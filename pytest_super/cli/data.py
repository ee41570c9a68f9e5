"""`pytest-super download`, `import` and `import-trajectories`: SUPER's and LMR-Bench's data, and
the runs they published."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_super.cli.parsing import Subparsers
from pytest_super.kernels.jupyter.output import console_text
from pytest_super.paths import shown_path


def add_download(sub: Subparsers) -> None:
    """`download [prompts]`: SUPER's task files or its prompt file."""
    p = sub.add_parser(
        "download",
        help="fetch SUPER's task files (Expert, Masked, Auto) from the Hugging Face Hub; "
        "`download prompts`: the reference's prompt.yaml (for --super-prompts)",
    )
    p.add_argument(
        "what",
        nargs="?",
        choices=("tasks", "prompts", "lmr-bench"),
        default="tasks",
        help="tasks (default), or prompts: SUPER's agent/prompt.yaml at the pinned commit, its "
        "sha256 checked, with its license, into ~/.cache/pytest-super/prompts/<commit>/; or "
        "lmr-bench: LMR-Bench's tree at its pinned commit, its digest checked, with its license",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="folder (default tasks/super; prompts: the cache folder; lmr-bench: lmr-bench)",
    )
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        choices=("expert", "masked", "auto"),
        help="only this set (repeatable; default all three)",
    )
    p.add_argument("--revision", help="dataset commit (default: the pinned one)")
    p.set_defaults(func=_download)


def add_import(sub: Subparsers) -> None:
    """`import FILE`: SUPER's JSON lines as YAML task files."""
    p = sub.add_parser("import", help="turn SUPER's JSON lines into one YAML task file per task")
    p.add_argument("file", type=Path)
    p.add_argument("--set", dest="set_name", choices=("expert", "masked", "auto"))
    p.add_argument("--out", type=Path, required=True, help="folder for the YAML files")
    p.set_defaults(func=_import)


def add_import_trajectories(sub: Subparsers) -> None:
    """`import-trajectories DIR`: published episodes as trajectories and results."""
    p = sub.add_parser(
        "import-trajectories",
        help="turn SUPER's published episodes (history.ipynb + metrics.json) into trajectories "
        "and results.jsonl; or LMR-Bench's published runs (results.txt, OpenHands's output.jsonl)",
    )
    p.add_argument(
        "dir",
        type=Path,
        help="a published run folder, or a folder of them; or LMR-Bench's tree (its results/)",
    )
    p.add_argument("--out", type=Path, default=Path("reports"), help="where to write (reports/)")
    p.add_argument(
        "--rescore",
        action="store_true",
        help="also score each episode with our own scorer (submitted, script-executed) and list "
        "where it differs from the published values",
    )
    p.set_defaults(func=_import_trajectories)


def _download(args: argparse.Namespace) -> int:
    from pytest_super.download import DEFAULT_REVISION, download_tasks
    from pytest_super.reference_files import download_prompts

    if args.what != "tasks" and (args.sets or args.revision):
        print(
            f"pytest-super download {args.what}: --set and --revision are for tasks",
            file=sys.stderr,
        )
        return 2
    if args.what == "lmr-bench":
        return _download_lmr_bench(args.out or Path("lmr-bench"))
    if args.what == "prompts":
        path = download_prompts(args.out)
        shown, license_file = shown_path(path), shown_path(path.with_name("LICENSE.md"))
        print(f"SUPER's prompts: {shown} (license: {license_file})")
        print(f"run with them: pytest tasks --super-agent=react-super --super-prompts={shown}")
        return 0
    args.out = args.out or Path("tasks/super")
    written = download_tasks(args.out, sets=args.sets, revision=args.revision or DEFAULT_REVISION)
    for item in written:
        lines = sum(1 for ln in item.path.read_text().splitlines() if ln.strip())
        shown = shown_path(item.path)
        print(f"{item.set_name}: {shown} ({lines} tasks, dataset commit {item.commit})")
    print(f"run them: pytest {shown_path(args.out)} --super-agent=react-super --super-model=gpt-4o")
    return 0


def _download_lmr_bench(out: Path) -> int:
    from pytest_super.lmr_download import download_lmr_bench

    manifest = download_lmr_bench(out)
    shown = shown_path(out)
    print(
        f"LMR-Bench: {shown} ({manifest['files']} files at commit {manifest['commit']}, tree "
        f"digest checked; license: {shown_path(out / str(manifest['license']))})"
    )
    print(f"run it: pytest {shown_path(out / 'benchmark')} --super-agent=gold")
    return 0


def _import(args: argparse.Namespace) -> int:
    from pytest_super.tasks import import_jsonl

    written = import_jsonl(args.file, args.set_name, args.out)
    print(f"wrote {len(written)} task files to {shown_path(args.out)}")
    return 0


def _import_trajectories(args: argparse.Namespace) -> int:
    from pytest_super.lmr_import import is_lmr_bench
    from pytest_super.published_runs import import_run, published_runs

    if is_lmr_bench(args.dir):
        return _import_lmr_runs(args)
    failed = 0
    for run_dir in published_runs(args.dir):
        done = import_run(run_dir, args.out, rescore=args.rescore)
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(done.statuses.items()))
        print(
            f"imported {done.imported} episodes of {run_dir.name} into {shown_path(done.folder)} "
            f"({statuses})"
        )
        for line in done.warnings:  # lines quoting a foreign run: no terminal escapes
            print(console_text(f"warning: {line}"), file=sys.stderr)
        for line in done.errors:
            print(console_text(f"error: not imported: {line}"), file=sys.stderr)
        if args.rescore:
            print(f"  rescored: {len(done.rescore_differences)} differ from the published values")
            for line in done.rescore_differences:
                print(console_text(f"    {line}"))
        failed += len(done.errors)
    if failed:
        print(f"{failed} episode folders could not be read (named above)", file=sys.stderr)
    return 1 if failed else 0


def _import_lmr_runs(args: argparse.Namespace) -> int:
    from pytest_super.lmr_import import import_lmr_runs

    failed = 0
    for done in import_lmr_runs(args.dir, args.out):
        episodes = f", {done.episodes} OpenHands episodes" if done.episodes else ""
        if done.tasks:
            print(
                f"imported LMR-Bench's {done.name}: {done.tasks} tasks ({done.passed} passed"
                f"{episodes}) into {shown_path(done.folder)}"
            )
        for line in done.errors:  # lines quoting foreign files: no terminal escapes
            print(console_text(f"error: not imported: {line}"), file=sys.stderr)
        failed += len(done.errors)
    if failed:
        print(f"{failed} parts could not be read (named above)", file=sys.stderr)
    return 1 if failed else 0
