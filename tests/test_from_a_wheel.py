"""What a user who installed the wheel is told and given works without the repository (issue 44):
the hints of the engine and image errors name the repository's helpers (`make docker`, `make
image`, `scripts/ensure-docker.sh`) only when pytest-super runs from a checkout that has them, and
the cluster guide's node script is the `pytest-super ray-node` subcommand, shipped in the package.

The package is copied into a folder of its own, as a wheel installs it (no Makefile, no scripts/
beside it), and imported from there in a fresh interpreter."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from fnmatch import fnmatch
from pathlib import Path

import pytest
import tomllib

import pytest_super

PACKAGE = Path(pytest_super.__file__).resolve().parent
CHECKOUT = PACKAGE.parent

# the messages, from the package imported wherever it stands (a socket that does not exist: no
# engine is needed, the client's ping fails at once)
PROBE = """
import json, sys
import pytest_super
from pytest_super.errors import EngineUnavailable
from pytest_super.kernels.docker import backend, engine, image
messages = {}
try:
    engine.docker_client_for(sys.argv[1])
except EngineUnavailable as exc:
    messages["no engine"] = str(exc)
messages["engine stopped"] = str(backend._start_error(ConnectionError("gone"), "t1", "img", "x"))
messages["default image"] = image.build_hint(image.default_image_tag("default"))
messages["colab image"] = image.build_hint(image.default_image_tag("colab"))
messages["other image"] = image.build_hint("example/other:1")
print(json.dumps({"package": pytest_super.__file__, "messages": messages}))
"""


def _messages(site: Path) -> tuple[str, dict[str, str]]:
    socket = f"unix:///tmp/no-engine-{uuid.uuid4().hex}.sock"
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {str(site)!r})\n{PROBE}",
            socket,
        ],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert len(out["messages"]) == 5, out
    return out["package"], out["messages"]


@pytest.fixture
def wheel_site(tmp_path: Path) -> Path:
    """A site folder holding the package alone, as `pip install pytest-super` leaves it."""
    site = tmp_path / f"site-{uuid.uuid4().hex[:8]}"
    shutil.copytree(PACKAGE, site / "pytest_super", ignore=shutil.ignore_patterns("__pycache__"))
    return site


def test_from_a_wheel_the_hints_name_only_what_the_wheel_has(wheel_site: Path):
    package, messages = _messages(wheel_site)
    assert package.startswith(str(wheel_site)), package  # the copy was imported, not the checkout
    for what, text in messages.items():
        assert "make " not in text and "scripts/" not in text, f"{what}: {text}"
    assert "`sudo dockerd`" in messages["no engine"], messages["no engine"]
    assert "https://docs.docker.com/engine/install/" in messages["no engine"]
    assert "`sudo dockerd`" in messages["engine stopped"], messages["engine stopped"]
    assert messages["default image"] == "`pytest-super image build`"
    assert messages["colab image"] == "`pytest-super image build --profile colab`"


@pytest.mark.skipif(
    not (CHECKOUT / "Makefile").is_file() or not (CHECKOUT / "scripts/ensure-docker.sh").is_file(),
    reason="runs from an installed wheel, not a checkout",
)
def test_from_a_checkout_the_hints_also_name_its_helpers():
    _, messages = _messages(CHECKOUT)
    assert "`scripts/ensure-docker.sh`" in messages["no engine"], messages["no engine"]
    assert "`scripts/ensure-docker.sh`" in messages["engine stopped"]
    assert messages["default image"] == "`pytest-super image build` (or `make image`)"
    assert "(or `make image-colab`)" in messages["colab image"]


def _cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`pytest-super ARGS` with the package imported from `site`, run in `site`."""
    code = (
        f"import sys; sys.path.insert(0, {str(site)!r})\n"
        "import pytest_super\n"
        f"assert pytest_super.__file__.startswith({str(site)!r}), pytest_super.__file__\n"
        "from pytest_super.cli import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    return subprocess.run(
        [sys.executable, "-I", "-c", code, *args],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_node_script_is_package_data_of_the_wheel():
    config = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["pytest_super"]
    assert (PACKAGE / "executors/ray/ray-node.sh").is_file()
    assert any(fnmatch("executors/ray/ray-node.sh", p) for p in patterns), patterns


def test_ray_node_runs_from_a_wheel_its_help(wheel_site: Path):
    done = _cli(wheel_site, "ray-node", "--help")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pytest-super ray-node worker DIR --address HEAD:6379 --docker-host URL" in done.stdout
    assert "--attempts K" in done.stdout and "scripts/ray-node.sh" not in done.stdout


def test_ray_node_runs_from_a_wheel_its_argument_checks(wheel_site: Path):
    node = wheel_site / "n"
    sizing = ("--tasks", "3", "--super-cpus", "0.5", "--super-mem", "1g")
    worker = ("--address", "127.0.0.1:9", "--docker-host", "unix:///nonexistent.sock")
    done = _cli(wheel_site, "ray-node", "worker", str(node), *worker, *sizing)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("pytest-super ray-node: --tasks 3 x --super-cpus 0.5"), (
        done.stderr
    )
    assert not (node / "node.pid").exists()  # nothing was started
    done = _cli(wheel_site, "ray-node", "stop", str(node))
    assert done.returncode == 2 and f"no node.pid in {node}" in done.stderr, done.stderr
    done = _cli(wheel_site, "ray-node", "start", str(node))
    assert done.returncode == 2 and "invalid choice: 'start'" in done.stderr, done.stderr


@pytest.mark.parametrize("args", [("--help",), ("image", "--help")])
def test_the_commands_help_from_a_wheel_names_no_repository_helper(wheel_site: Path, args):
    done = _cli(wheel_site, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "make " not in done.stdout and "scripts/" not in done.stdout, done.stdout
