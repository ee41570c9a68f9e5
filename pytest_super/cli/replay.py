"""`pytest-super replay-run` (our agents against the published episodes) and `serve` (a stand-in
model for dry runs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_super.cli.parsing import Subparsers
from pytest_super.errors import SuperError
from pytest_super.kernels.jupyter.output import console_text
from pytest_super.scratch import scratch_folder

if TYPE_CHECKING:
    from pytest_super.prompts import PromptSet
    from pytest_super.replay.expected import ExpectedRequests


def add_replay_run(sub: Subparsers) -> None:
    """`replay-run DIR`: our agents against the published episodes, compared."""
    p = sub.add_parser(
        "replay-run",
        help="run our agents closed-loop against each published episode (its replies and "
        "observations replayed) and compare what they do, step by step",
    )
    p.add_argument(
        "dir",
        type=Path,
        help="a published run folder, a folder of them, a shipped .tar.xz of one, or a run "
        "import-trajectories wrote",
    )
    p.add_argument("--json", type=Path, help="write the per-episode comparison here")
    p.add_argument(
        "--check-prompts",
        action="store_true",
        help="also check that every request our agent sent opens with each episode's recorded "
        "prompt (the pinned prompt.yaml's system message with --prompts reference)",
    )
    p.add_argument(
        "--prompts",
        type=Path,
        help="the agents' prompts: `reference` (the reference's own files at the pinned commit, "
        "downloaded once), SUPER's prompt.yaml (with a protocol.yaml beside it), or a folder of "
        "templates; default: ours",
    )
    p.add_argument(
        "--expected-requests",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="the reference agent's requests of a run (scripts/reference-requests.py writes "
        "them): each request our agent sends is compared with the reference's at that turn",
    )
    p.add_argument(
        "--task",
        action="append",
        default=[],
        metavar="ID",
        help="replay only this episode (repeat for more; default: all)",
    )
    p.add_argument(
        "--steps",
        type=_positive_int,
        default=None,
        metavar="N",
        help="the run's step limit (default: ours, the reference's 100): an episode of more "
        "model calls must end at the limit after its N-th step",
    )
    p.set_defaults(func=_replay_run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def add_serve(sub: Subparsers) -> None:
    """`serve`: a stand-in model for dry runs (serve.py)."""
    p = sub.add_parser(
        "serve",
        help="a stand-in model: an OpenAI-compatible endpoint on 127.0.0.1 for dry runs (CI, a "
        "new agent, a demo without a key); prints its base URL, serves until Ctrl-C",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--run",
        type=Path,
        help="serve a published run's recorded replies (a run folder or a shipped .tar.xz)",
    )
    source.add_argument("--script", type=Path, help="serve the replies of a JSON list, in order")
    p.add_argument(
        "--agent",
        default="react-super",
        choices=["react-super", "swe"],
        help="the submit policy's reply format (default react-super)",
    )
    p.add_argument("--answer", default="{}", help="what the submit policy submits (default {})")
    p.add_argument("--url-file", type=Path, help="also write the base URL to this file")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    import signal
    import time

    from pytest_super.serve import ServeError, serve

    def ready(url: str) -> None:
        print(f"base URL: {url}", flush=True)
        print(f"    pytest ... --super-base-url={url} --super-model=MODEL", flush=True)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the endpoint stopped, its files gone
    with scratch_folder("pytest-super-serve-") as work:
        try:
            endpoint = serve(args, work, ready=ready)
        except ServeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0
        finally:
            endpoint.stop()


def _replay_run(args: argparse.Namespace) -> int:
    """Ctrl-C (SIGTERM) ends it quietly with status 130 (143), its scratch folder removed."""
    from pytest_super.interrupts import Stopped, quiet_interrupts

    try:
        with quiet_interrupts():
            return _replay_unpacked(args)
    except Stopped as stop:
        print(f"pytest-super replay-run: stopped ({stop})", file=sys.stderr)
        return 128 + stop.signum


def _replay_unpacked(args: argparse.Namespace) -> int:
    from pytest_super.serve import ServeError, unpacked_run

    if args.check_prompts and args.prompts is None:
        print("error: --check-prompts needs --prompts FILE (the prompt file)", file=sys.stderr)
        return 2
    if args.json is not None:
        _check_output_file("--json", args.json)
    try:
        prompts, expected = _replay_inputs(args)
    except SuperError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with scratch_folder("pytest-super-replay-") as work:
        try:
            top = unpacked_run(args.dir, work)  # a shipped .tar.xz is unpacked first
        except ServeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return _replay_runs(args, top, prompts, expected)


def _replay_runs(
    args: argparse.Namespace,
    top: Path,
    prompts: PromptSet | None,
    expected: dict[str, ExpectedRequests],
) -> int:
    from pytest_super.published_runs import published_runs
    from pytest_super.replay.imported import is_imported_run
    from pytest_super.replay.run import replay_run, report_lines, write_json

    replays, failed = [], False
    runs = [top] if is_imported_run(top) else published_runs(top)
    for run_dir in runs:
        try:
            replay = replay_run(
                run_dir,
                prompts=prompts,
                expected=expected.get(run_dir.name),
                only=set(args.task) or None,
                steps=args.steps,
            )
        except SuperError as exc:  # this run alone: named, the others go on
            print(
                console_text(f"pytest-super: {run_dir.name}: not replayed: {exc}"), file=sys.stderr
            )
            failed = True
            continue
        replays.append(replay)
        print(f"{run_dir.name}:")
        for line in report_lines(replay):  # quotes the episode's model text: no escapes
            print(console_text(f"  {line}"))
        failed = failed or bool(replay.undocumented) or bool(replay.errors)
        if args.check_prompts and prompts is not None:  # it needs --prompts (_replay_unpacked)
            from pytest_super.prompt_check import check_sent_prompts

            sent = [(e.task_id, e.requests) for e in replay.episodes]
            differences = check_sent_prompts(run_dir, sent, prompts)
            for line in differences:
                print(console_text(f"  prompt: {line}"))
            failed = failed or bool(differences)
    if args.json is not None:
        write_json(replays, args.json)
    if not replays:  # no run could be replayed at all
        return 2
    return 1 if failed else 0


def _check_output_file(option: str, path: Path) -> None:
    """A file a command will write, checked before its work: not a folder, in a folder that is."""
    if path.is_dir():
        raise SuperError(f"{option} {path}: a folder; name a file to write (e.g. {path}/out.json)")
    if not path.parent.is_dir():
        raise SuperError(
            f"{option} {path}: its folder {path.parent} does not exist; create it or name a file "
            "in a folder that exists"
        )


def _replay_inputs(
    args: argparse.Namespace,
) -> tuple[PromptSet | None, dict[str, ExpectedRequests]]:
    """replay-run's prompt set (None: ours) and expected requests by run name."""
    from pytest_super.prompts import load_prompts
    from pytest_super.replay.expected import read_expected

    prompts = load_prompts(args.prompts) if args.prompts is not None else None
    expected = {}
    for path in args.expected_requests:
        read = read_expected(path)
        expected[read.run] = read
    return prompts, expected
