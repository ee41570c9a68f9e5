"""A kernel backend's own `pytest-super` subcommands (`add_commands` of the backend contract,
`kernels.backend_commands`): a third party's appear in the command's help and run, with the
options of its settings and the exit status its command returns; a backend without any adds
nothing; Docker's `image` is one of them, and the CLI imports nothing of Docker's itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TOY_BACKEND = """\
from pytest_super.kernels.base import BackendSetting
from pytest_super.kernels.local import LocalBackend


def _hello(args):
    print(f"toy hello {args.name} at depth {args.toy_depth}")
    return 3


class ToyBackend(LocalBackend):
    settings = (BackendSetting("toy_depth", int, 2, "depth of the toy backend's boxes"),)

    @classmethod
    def add_commands(cls, subparsers, tools):
        p = subparsers.add_parser("toy-hello", help="say hello from the toy backend")
        p.add_argument("name")
        tools.add_setting_argument(p, "toy_depth")
        p.set_defaults(func=_hello)


class QuietBackend(LocalBackend):
    pass
"""


def _install_toy_backend(site: Path) -> dict[str, str]:
    """Two third-party kernel backends, registered as entry points of `pytest_super.backends` by
    a distribution's metadata on the subprocess's PYTHONPATH: its environment."""
    site.mkdir()
    (site / "toy_backend.py").write_text(TOY_BACKEND)
    info = site / "toy_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[pytest_super.backends]\ntoy = toy_backend:ToyBackend\nquiet = toy_backend:QuietBackend\n"
    )
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


def _command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_super.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_backends_subcommand_is_in_the_help_and_runs(tmp_path: Path) -> None:
    env = _install_toy_backend(tmp_path / "site")
    shown = _command(env, "--help")
    assert shown.returncode == 0, shown.stderr
    assert "toy-hello" in shown.stdout
    assert "say hello from the toy backend" in shown.stdout
    assert "image" in shown.stdout  # Docker's, still there
    helped = _command(env, "toy-hello", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "--toy-depth TOY_DEPTH" in helped.stdout
    assert "depth of the toy backend's boxes" in helped.stdout  # the setting's own help
    ran = _command(env, "toy-hello", "world", "--toy-depth", "5")
    assert (ran.returncode, ran.stdout, ran.stderr) == (3, "toy hello world at depth 5\n", "")


def test_a_backend_without_commands_adds_none() -> None:
    from pytest_super.kernels.base import BackendBase
    from pytest_super.kernels.local import LocalBackend

    class Recorder:
        def add_parser(self, *args: object, **kwargs: object) -> None:
            raise AssertionError(f"a subcommand was added: {args}")

    assert issubclass(LocalBackend, BackendBase)
    LocalBackend.add_commands(Recorder(), tools=None)  # type: ignore[arg-type]


def test_dockers_commands_come_through_the_contract() -> None:
    from pytest_super import kernels

    found = dict(kernels.backend_commands())
    assert set(found) >= {"docker"}
    assert found["docker"].__module__ == "pytest_super.kernels.docker.cli"
    assert "local" not in found and "replay" not in found
