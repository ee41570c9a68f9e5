"""Every `pytest-super ...` command the package prints (a hint after an interrupted run, a failed
cleanup, a download) is one the command line accepts: its argument list goes through the CLI's
parser (issue 30 item 3: the cluster hint `pytest-super cleanup --ray` was refused). Each cleanup
hint that names a run is also run, its fields filled as the code that prints it fills them, and
must remove that run's container: here, or on every node of a real Ray cluster (issue 32 item 6:
`cleanup --run ID` with RAY_ADDRESS set, or `--ray-address`, cleans the cluster's nodes)."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import shlex
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_super.cli import build_parser
from tests.support.ray_fixtures import CLUSTER_TIMEOUT

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_super"

#: a command in a message: in backticks, or a line of its own
COMMAND = re.compile(r"(?:`|^[ \t]*)pytest-super ([a-z][a-z-]*[^`\n]*?)(?:`|[ \t]*$)", re.M)

#: what a formatted field stands for in a printed command (a run id, an address, a name, a path)
FIELD = "X1"


def _text_of(node: ast.expr) -> str:
    """A string literal's text, each f-string field as FIELD."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    assert isinstance(node, ast.JoinedStr)
    return "".join(part.value if isinstance(part, ast.Constant) else FIELD for part in node.values)


def printed_commands(path: Path, fill: Any = None) -> list[tuple[str, str]]:
    """(where, command) of each `pytest-super ...` in a string of `path` that is not a docstring;
    each f-string field is FIELD. With `fill` (a namespace), only the cleanup commands naming a
    run, each field the value of its expression in the module's namespace and `fill`'s (as the
    message is made at run time)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    pieces = {  # the pieces of f-strings, read with them (once a walk of the tree per node:
        # 20 s of CPU in every collection of tests/, each xdist worker's)
        id(part)
        for parent in ast.walk(tree)
        if isinstance(parent, ast.JoinedStr)
        for part in parent.values
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in docstrings or not isinstance(node, ast.Constant | ast.JoinedStr):
            continue
        if isinstance(node, ast.Constant) and not isinstance(node.value, str):
            continue
        if id(node) in pieces:
            continue
        text = _text_of(node)
        if fill is not None:
            if not any(_names_a_run(m.group(1)) for m in COMMAND.finditer(text)):
                continue
            text = _filled(node, path, fill)
        for match in COMMAND.finditer(text):
            command = match.group(1).strip()
            if _is_command(command):
                found.append((f"{path.relative_to(PACKAGE)}:{node.lineno}", command))
    return found


def _names_a_run(command: str) -> bool:
    words = command.split()
    return words[:1] == ["cleanup"] and "--run" in words


class _Locals(dict[str, Any]):
    """The local names of a message's fields: `self`; a name neither here nor the module's nor a
    builtin (the message's other fields: `exc`) stands as FIELD."""

    def __init__(self, module: dict[str, Any], names: dict[str, Any]) -> None:
        super().__init__(names)
        self.module = module

    def __missing__(self, key: str) -> Any:
        if key in self.module or hasattr(builtins, key):
            raise KeyError(key)  # found in the module's namespace, then the builtins
        return FIELD


def _filled(node: ast.expr, path: Path, names: Any) -> str:
    """A string literal's text, each f-string field evaluated in `path`'s module with `names` as
    `self` and as the names of its attributes (the object or the run that prints the message)."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    assert isinstance(node, ast.JoinedStr)
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    module = importlib.import_module(
        ".".join(("pytest_super", *parts[: -1 if parts[-1] == "__init__" else None]))
    )
    text = ""
    for part in node.values:
        if isinstance(part, ast.Constant):
            text += str(part.value)
            continue
        assert isinstance(part, ast.FormattedValue) and part.format_spec is None, ast.dump(part)
        code = compile(ast.Expression(part.value), str(path), "eval")
        local = _Locals(vars(module), {"self": names, **vars(names)})  # self.run, or run
        value = eval(code, vars(module), local)  # noqa: S307 - our own source
        text += repr(value) if part.conversion == ord("r") else str(value)
    return text


#: the subcommands of `pytest-super`
SUBCOMMANDS = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def _is_command(text: str) -> bool:
    """A command, not prose about one: it starts with a subcommand, and is not a message's prefix
    (`pytest-super report: X: no such file`) or prose (`pytest-super checks the endpoint`)."""
    words = text.split()
    return words[0] in SUBCOMMANDS and not any(w.endswith(":") for w in words[:2])


COMMANDS = [c for p in sorted(PACKAGE.rglob("*.py")) for c in printed_commands(p)]
CLEANUP = [(where, command) for where, command in COMMANDS if command.startswith("cleanup")]


def test_the_package_prints_cleanup_hints_for_each_place_that_leaves_something() -> None:
    places = {where.split(":")[0] for where, _ in CLEANUP}
    assert {"executors/local.py", "interrupts.py", "executors/ray/settings.py"} <= places, CLEANUP


def _accepted(command: str) -> str | None:
    """None if the CLI's parser takes `command`'s arguments, else what it said."""
    try:
        build_parser().parse_args(shlex.split(command))
    except SystemExit as exc:
        return f"refused (exit {exc.code})"
    return None


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_each_printed_command_is_accepted_by_the_cli(
    where: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = _accepted(command)
    assert refused is None, (
        f"{where}: `pytest-super {command}` {refused}: {capsys.readouterr().err}"
    )


def test_the_check_sees_a_refused_command(tmp_path: Path) -> None:
    module = PACKAGE / "_printed_commands_probe.py"
    module.write_text('HINT = f"run `pytest-super cleanup --nowhere --run {1}`"\n')
    try:
        [(where, command)] = printed_commands(module)
    finally:
        module.unlink()
    assert command == "cleanup --nowhere --run X1"
    assert _accepted(command) == "refused (exit 2)"


# -- `pytest-super cleanup --backend NAME` ------------------------------------------------------
def test_cleanup_of_the_local_backend_asks_that_backend(capsys: pytest.CaptureFixture[str]) -> None:
    """The local backend's kernels die with their process: nothing is left, and no engine is
    asked (this passes with no Docker at all)."""
    from pytest_super.cli import main

    assert main(["cleanup", "--backend", "local", "--docker-host", "tcp://127.0.0.1:9"]) == 0
    assert main(["cleanup", "--backend", "local", "--run", "20261125-000000-x"]) == 0
    assert capsys.readouterr().out.splitlines() == ["removed 0 containers"] * 2


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["cleanup", "--backend", "nowhere"],
            "cleanup --backend 'nowhere': unknown kernel backend 'nowhere'; known kernel backends: "
            "docker, local, replay",
        ),
        (["cleanup", "--all", "--backend", "local"], "--all is for the docker backend"),
    ],
)
def test_cleanup_refuses_what_it_cannot_do_with_a_sentence(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_super.cli import main

    assert main(argv) == 2
    assert said in capsys.readouterr().err


def test_cleanup_on_a_cluster_names_the_address_it_could_not_reach(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--executor ray` goes to the cluster at --ray-address: one that does not answer is an
    error naming it (no cluster is started here; see tests/test_ray_backend.py for a real one)."""
    from pytest_super.cli import main

    pytest.importorskip("ray")
    assert main(["cleanup", "--executor", "ray", "--ray-address", "127.0.0.1:9"]) == 2
    assert "--super-ray-address 127.0.0.1:9: no Ray cluster answers there" in (
        capsys.readouterr().err
    )


# -- `pytest-super cleanup`: where it cleans ------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["cleanup", "--backend", "local", "--executor", "local", "--run", "20261125-000000-y"],
        ["cleanup", "--backend", "local", "--docker-host", "tcp://127.0.0.1:9"],
    ],
    ids=["executor-local", "docker-host"],
)
def test_cleanup_with_an_address_in_the_environment_still_cleans_here_when_told(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """RAY_ADDRESS points at nothing: `--executor local` or `--docker-host` clean this machine
    and never ask the cluster."""
    from pytest_super.cli import main

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines() == ["removed 0 containers"]


@pytest.mark.parametrize(
    ("argv", "env", "source"),
    [
        (["cleanup", "--run", "20261125-000000-z"], "127.0.0.1:9", "environment variable"),
        (["cleanup", "--ray-address", "127.0.0.1:9"], "", "--ray-address"),
    ],
    ids=["environment", "option"],
)
def test_cleanup_goes_to_the_cluster_whose_address_it_is_given(
    argv: list[str],
    env: str,
    source: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No --executor: an address in the environment or on the command line is the cluster to
    clean (here one where nothing answers: the error names it)."""
    from pytest_super.cli import main

    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ADDRESS", env)
    assert main(argv) == 2
    assert "127.0.0.1:9" in capsys.readouterr().err


def test_cleanup_all_goes_to_the_cluster_whose_address_is_in_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--all` with RAY_ADDRESS set cleans the cluster's nodes, not this machine's engine (here
    one where nothing answers: the error names it); the real cluster's case is below."""
    from pytest_super.cli import main

    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    assert main(["cleanup", "--all"]) == 2
    assert "127.0.0.1:9: no Ray cluster answers there" in capsys.readouterr().err


# -- each cleanup hint that names a run, run -------------------------------------------------------
def _run_hints(where_prefix: str, run: Any) -> list[tuple[str, str]]:
    """The cleanup hints naming a run in the modules under `where_prefix`, filled for `run`."""
    from pytest_super.executors import cleanup_options

    fill = SimpleNamespace(run=run, run_id=run.run_id, where=cleanup_options(run))
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if not str(path.relative_to(PACKAGE)).startswith(where_prefix):
            continue
        found += [(w, c) for w, c in printed_commands(path, fill) if _names_a_run(c)]
    return found


def _leave_container(client: Any, image: str, run_id: str) -> str:
    """A (created, not started) container labelled as one of run `run_id`'s kernels."""
    from pytest_super.kernels.docker.engine import LABEL, LABEL_RUN

    name = f"pytest-super-hint-{uuid.uuid4().hex[:10]}"
    client.containers.create(
        image, ["sleep", "600"], name=name, labels={LABEL: "1", LABEL_RUN: run_id}
    )
    return name


def _left(client: Any, name: str) -> bool:
    return bool(client.containers.list(all=True, filters={"name": name}))


@pytest.mark.docker
def test_each_cleanup_hint_for_this_machine_removes_the_runs_container(
    image: str, engine: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hints a run on this machine prints (a failed end-of-run removal, a second Ctrl-C),
    filled for a run and run: the run's container is gone."""
    from pytest_super.cli import main
    from pytest_super.settings import SuperRun

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    run = SuperRun()
    hints = [h for h in _run_hints("", run) if not h[0].startswith("executors/ray/")]
    assert {w.split(":")[0] for w, _ in hints} >= {"executors/local.py", "interrupts.py"}, hints
    for where, command in hints:
        name = _leave_container(engine, image, run.run_id)
        try:
            assert main(shlex.split(command)) == 0, where
            out = capsys.readouterr().out
            assert f"removed 1 containers: {name}" in out, (where, command, out)
            assert not _left(engine, name), (where, command)
        finally:
            if _left(engine, name):
                engine.containers.get(name).remove(force=True)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.xdist_group("ray")
@CLUSTER_TIMEOUT
def test_each_cluster_cleanup_hint_and_the_address_alone_clean_every_node(
    image: str, cluster: Any
) -> None:
    """On the session's real cluster (tests/support/ray_fixtures.py): the hints a cluster run
    prints (nodes not cleaned at the end, the cluster lost), and `cleanup --run ID` given only
    RAY_ADDRESS or only `--ray-address`, each remove the run's container from a node's engine and
    name the cluster and every node they cleaned; `cleanup --all` removes one on each node."""
    import docker

    from pytest_super.executors.ray.settings import cluster_run
    from pytest_super.kernels.base import KernelSettings

    node_engine = docker.DockerClient(base_url=cluster.engines[0])
    run = cluster_run(cluster.address, kernel=KernelSettings(backend="docker"))
    hints = _run_hints("executors/ray/", run)
    assert hints, "executors/ray prints no cleanup hint naming the run"
    by_command = {command: where for where, command in hints}  # the same command: run once
    commands = [(where, command, {}) for command, where in by_command.items()] + [
        ("the address in RAY_ADDRESS", f"cleanup --run {run.run_id}", {}),
        (
            "the address given",
            f"cleanup --ray-address {cluster.address} --run {run.run_id}",
            {"RAY_ADDRESS": ""},
        ),
    ]
    for where, command, env in commands:
        name = _leave_container(node_engine, image, run.run_id)
        try:
            done = cluster.run(
                [sys.executable, "-m", "pytest_super.cli", *shlex.split(command)],
                env=env,
                timeout=180,
            )
            said = done.stdout + done.stderr
            assert done.returncode == 0, (where, command, said)
            assert f"cleaned the ray cluster at {cluster.address}" in done.stdout, (where, said)
            assert f": {name}" in done.stdout and "removed 1 containers" in done.stdout, said
            assert done.stdout.count("(1 removed)") == 1, said  # node 0
            assert done.stdout.count("(0 removed)") == 1, said  # node 1, cleaned too
            assert not _left(node_engine, name), (where, command, said)
        finally:
            if _left(node_engine, name):
                node_engine.containers.get(name).remove(force=True)
    engines = [node_engine, docker.DockerClient(base_url=cluster.engines[1])]
    names = [_leave_container(engine, image, f"all-{run.run_id}") for engine in engines]
    try:
        done = cluster.run(
            [sys.executable, "-m", "pytest_super.cli", "cleanup", "--all"], timeout=180
        )
        said = done.stdout + done.stderr
        assert done.returncode == 0, said
        assert done.stdout.count("(1 removed)") == 2 and "removed 2 containers" in said, said
        assert not any(_left(e, n) for e, n in zip(engines, names, strict=True)), said
    finally:
        for engine, name in zip(engines, names, strict=True):
            if _left(engine, name):
                engine.containers.get(name).remove(force=True)
            engine.close()


def test_the_second_ctrl_c_hint_of_a_cluster_run_names_its_cluster() -> None:
    """After a second Ctrl-C the controller of a cluster run prints a cleanup that reaches the
    cluster's nodes (its address), not this machine's engine only."""
    from pytest_super.settings import SuperRun

    run = SuperRun.resolve(executor="ray", ray_address="head.example:6379")
    hints = [c for w, c in _run_hints("interrupts.py", run)]
    assert hints == [
        f"cleanup --run {run.run_id} --executor ray --ray-address head.example:6379"
    ], hints
    assert _accepted(hints[0]) is None
