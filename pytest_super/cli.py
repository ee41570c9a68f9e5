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
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Container
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from pytest_super import executors
from pytest_super.errors import SuperError
from pytest_super.kernels.docker.image import COLAB_LOCK, DEFAULT_BASE, PROFILES
from pytest_super.kernels.jupyter.output import console_text
from pytest_super.paths import shown_path
from pytest_super.safe_read import ForeignDataError
from pytest_super.settings import add_shared_argument, cluster_addresses, resolve_setting_source

if TYPE_CHECKING:
    from pytest_super.kernels.base import KernelSettings
    from pytest_super.report import TaskRecord


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func  # the subcommand's set_defaults
    try:
        return func(args)
    except SuperError as exc:
        print(f"pytest-super: {exc}", file=sys.stderr)
        return 2


#: what `add_subparsers` returns
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def build_parser() -> argparse.ArgumentParser:
    """The `pytest-super` command line: one subcommand per `_add_*` function."""
    parser = argparse.ArgumentParser(prog="pytest-super", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        _add_download,
        _add_import,
        _add_import_trajectories,
        _add_replay_run,
        _add_serve,
        _add_report,
        _add_html,
        _add_image,
        _add_cleanup,
        _add_node_commands,
    ):
        add(sub)
    return parser


def _add_download(sub: Subparsers) -> None:
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


def _add_import(sub: Subparsers) -> None:
    """`import FILE`: SUPER's JSON lines as YAML task files."""
    p = sub.add_parser("import", help="turn SUPER's JSON lines into one YAML task file per task")
    p.add_argument("file", type=Path)
    p.add_argument("--set", dest="set_name", choices=("expert", "masked", "auto"))
    p.add_argument("--out", type=Path, required=True, help="folder for the YAML files")
    p.set_defaults(func=_import)


def _add_import_trajectories(sub: Subparsers) -> None:
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


def _add_replay_run(sub: Subparsers) -> None:
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


def _add_serve(sub: Subparsers) -> None:
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
    import tempfile
    import time

    from pytest_super.serve import ServeError, serve

    def ready(url: str) -> None:
        print(f"base URL: {url}", flush=True)
        print(f"    pytest ... --super-base-url={url} --super-model=MODEL", flush=True)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the endpoint stopped, its files gone
    with tempfile.TemporaryDirectory(prefix="pytest-super-serve-") as work:
        try:
            endpoint = serve(args, Path(work), ready=ready)
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


def _add_report(sub: Subparsers) -> None:
    """`report FILES`: the summary table."""
    p = sub.add_parser("report", help="the summary table from JUnit XML or results.jsonl files")
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument(
        "--by-task", action="store_true", help="one row per task (e.g. ours next to the paper's)"
    )
    p.set_defaults(func=_report)


def _add_html(sub: Subparsers) -> None:
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


def _add_image(sub: Subparsers) -> None:
    """`image build|push|lock`: the kernel image."""
    image = sub.add_parser("image", help="the kernel image").add_subparsers(
        dest="image_cmd", required=True
    )
    p = image.add_parser("build", help="build the kernel image (skipped when up to date)")
    p.add_argument("--profile", choices=PROFILES, default="default", help="package set")
    p.add_argument("--base", default=None, help=f"base image (default {DEFAULT_BASE})")
    p.add_argument("--tag", default=None, help="image tag (default: from the build inputs)")
    p.add_argument("--requirements", type=Path, default=None, help="extra pip requirements file")
    p.add_argument(
        "--offline",
        action="store_true",
        help="no registry: bootstrap the base from Debian's archive with debootstrap",
    )
    add_shared_argument(p, "docker_host")
    p.add_argument(
        "--print-tag", action="store_true", help="print the default tag and exit (no engine needed)"
    )
    _add_executor_arguments(
        p, "build it on every live node of that executor's cluster (default: here)"
    )
    p.set_defaults(func=_image_build)
    p = image.add_parser(
        "push",
        help="push the kernel image to a registry as HOST:PORT/<its tag> (nodes pull it with "
        "--super-registry)",
    )
    p.add_argument("--registry", required=True, metavar="HOST:PORT", help="the registry")
    p.add_argument("--profile", choices=PROFILES, default="default", help="package set")
    p.add_argument("--tag", default=None, help="the image to push (default: the profile's tag)")
    add_shared_argument(p, "docker_host")
    p.set_defaults(func=_image_push)
    p = image.add_parser(
        "lock",
        help=f"resolve the colab profile again into {COLAB_LOCK} (needs uv)",
    )
    p.set_defaults(func=_image_lock)


def _add_cleanup(sub: Subparsers) -> None:
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
    add_shared_argument(p, "docker_host")
    _add_executor_arguments(
        p,
        "clean up on every live node of that executor's cluster (default: the cluster whose "
        "address is given or set in the environment, else here; --executor local or "
        "--docker-host: here)",
    )
    p.set_defaults(func=_cleanup)


#: the actions of a `NAME-node` command (executors.NODE_SCRIPTS)
NODE_ACTIONS = ("head", "worker", "stop", "status")


def _node_script(relative: str) -> Path:
    return Path(str(resources.files("pytest_super").joinpath(relative)))


def _add_node_commands(sub: Subparsers) -> None:
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


def _add_executor_arguments(p: argparse.ArgumentParser, what: str) -> None:
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


def _cluster_of(args: argparse.Namespace, *, implied: bool) -> Cluster | None:
    """The cluster a command acts on: `--executor NAME`'s; with `implied`, when no executor is
    named and no `--docker-host`, that of the executor whose cluster address is given
    (`--<setting>`) or set in the environment; None: this machine."""
    addresses = cluster_addresses()
    chosen = args.executor
    if chosen is None and implied and args.docker_host is None:
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


def _image_build(args: argparse.Namespace) -> int:
    from pytest_super.kernels.docker.image import build_image, build_inputs

    if args.print_tag:
        print(
            build_inputs(profile=args.profile, requirements=args.requirements, base=args.base).tag()
        )
        return 0
    cluster = _cluster_of(args, implied=False)
    if cluster is not None:
        executor, address, _source = cluster
        built = executors.cluster_executor(executor).build_on_nodes(
            address, profile=args.profile, base=args.base, offline=args.offline, tag=args.tag
        )
        for node, tag in built:
            print(f"{node}: {tag}")
        return 0
    try:
        tag = build_image(
            base=args.base,
            tag=args.tag,
            requirements=args.requirements,
            offline=args.offline,
            profile=args.profile,
            docker_host=args.docker_host,
        )
    except SuperError as exc:
        print(f"pytest-super image build: {exc}", file=sys.stderr)
        return 1
    print(tag)
    return 0


#: an image name Docker takes (its reference grammar, without a registry): NAME[:TAG]
_NAME_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_NAME = re.compile(
    rf"(?=.{{1,255}}(?::|$)){_NAME_PART}(?:/{_NAME_PART})*(?::\w[\w.-]{{0,127}})?"
)


def _image_push(args: argparse.Namespace) -> int:
    from pytest_super.kernels.docker.engine import docker_client_for
    from pytest_super.kernels.docker.image import default_image_tag
    from pytest_super.kernels.docker.registry import push_image, registry_address

    try:
        registry = registry_address(args.registry)
    except ValueError as exc:
        print(f"pytest-super image push: --registry {args.registry!r}: {exc}", file=sys.stderr)
        return 2
    if args.tag is not None and not IMAGE_NAME.fullmatch(args.tag):
        print(
            f"pytest-super image push: --tag {args.tag!r}: not an image name; name an image of "
            "the engine as NAME[:TAG] (NAME lower-case letters, digits and . _ - /, not first; "
            "TAG letters, digits, . _ -), e.g. pytest-super-kernel:default-<hash>",
            file=sys.stderr,
        )
        return 2
    tag = args.tag or default_image_tag(args.profile)
    try:
        remote = push_image(docker_client_for(args.docker_host), tag, registry)
    except SuperError as exc:
        print(f"pytest-super image push: {exc}", file=sys.stderr)
        return 1
    print(remote)
    return 0


def _image_lock(args: argparse.Namespace) -> int:
    from pytest_super.kernels.docker.image import lock_colab

    print(lock_colab())
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
    import tempfile

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
    with tempfile.TemporaryDirectory(prefix="pytest-super-replay-") as work:
        try:
            top = unpacked_run(args.dir, Path(work))  # a shipped .tar.xz is unpacked first
        except ServeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return _replay_runs(args, top, prompts, expected)


def _replay_runs(
    args: argparse.Namespace, top: Path, prompts: Any, expected: dict[str, Any]
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
        if args.check_prompts:
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


def _replay_inputs(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """replay-run's prompt set (None: ours) and expected requests by run name."""
    from pytest_super.prompts import load_prompts
    from pytest_super.replay.expected import read_expected

    prompts = load_prompts(args.prompts) if args.prompts is not None else None
    expected = {}
    for path in args.expected_requests:
        read = read_expected(path)
        expected[read.run] = read
    return prompts, expected


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


def _cleanup(args: argparse.Namespace) -> int:
    """What `--backend` left: of one run (`--run`), of runs whose pytest process is gone, or every
    container (`--all`, docker only); here, or on every live node of a cluster: `--executor`'s, or
    the one whose address is given or set in the environment (`_cluster_of`)."""
    from pytest_super.kernels.base import KernelSettings

    cluster = _cluster_of(args, implied=True)
    if args.all and args.backend != "docker":
        print(
            "pytest-super cleanup: --all is for the docker backend; give --run RUN_ID, or "
            "nothing for the runs whose pytest process is gone",
            file=sys.stderr,
        )
        return 2
    settings = KernelSettings(backend=args.backend, docker_host=args.docker_host)
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
    elif args.backend == "docker":
        removed = _cleanup_docker(settings, args.run_id, every=args.all)
    else:
        removed = _cleanup_backend(settings, args.run_id)
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


def _cleanup_docker(settings: KernelSettings, run_id: str | None, *, every: bool) -> list[str]:
    """Docker's containers, and the leases a run's killed processes left."""
    from pytest_super.kernels.docker.cleanup import cleanup_containers, cleanup_dead_leases
    from pytest_super.kernels.docker.engine import docker_client

    client = docker_client(settings)
    removed = cleanup_containers(client, run_id=run_id, dead_runs_only=not (every or run_id))
    if run_id:
        cleanup_dead_leases(client, run_id)
    return removed


def _cleanup_backend(settings: KernelSettings, run_id: str | None) -> list[str]:
    """Another backend's leftovers, through its `cleanup_run` / `cleanup_dead_runs`."""
    from pytest_super.kernels import kernel_backend

    try:
        backend = kernel_backend(settings)
    except ValueError as exc:
        raise SuperError(f"cleanup --backend {settings.backend!r}: {exc}") from None
    if run_id:
        return backend.cleanup_run(settings, run_id)
    return backend.cleanup_dead_runs(settings)


if __name__ == "__main__":
    sys.exit(main())
