"""Every `pytest-super ...` command the package prints (a hint after an interrupted run, a failed
cleanup, a download) is one the command line accepts: its argument list goes through the CLI's
parser (issue 30 item 3: the cluster hint `pytest-super cleanup --ray` was refused)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from pytest_super.cli import build_parser

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


def printed_commands(path: Path) -> list[tuple[str, str]]:
    """(where, command) of each `pytest-super ...` in a string of `path` that is not a docstring."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in docstrings or not isinstance(node, ast.Constant | ast.JoinedStr):
            continue
        if isinstance(node, ast.Constant) and not isinstance(node.value, str):
            continue
        if any(
            node is part
            for parent in ast.walk(tree)
            if isinstance(parent, ast.JoinedStr)
            for part in parent.values
        ):
            continue  # a piece of an f-string, read with it
        for match in COMMAND.finditer(_text_of(node)):
            command = match.group(1).strip()
            if _is_command(command):
                found.append((f"{path.relative_to(PACKAGE)}:{node.lineno}", command))
    return found


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
    assert {"run_record.py", "interrupts.py", "executors/ray/session.py"} <= places, CLEANUP


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
        (["cleanup", "--all", "--executor", "ray"], "--all is for the docker backend"),
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
