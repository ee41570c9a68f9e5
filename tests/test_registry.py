"""Kernel images through a registry (issue 33 item 3): `pytest-super image push` and
`--super-registry`, against a real registry (Debian's docker-registry, distribution 2.x,
tests/support/registry_server.py) on this host's loopback and the main Docker engine.

The kernel image other tests use is never removed: a run here names a throwaway copy of it. Its
default tag follows the CA bundle (a build input), so a run given SSL_CERT_FILE of a bundle with one
comment line more asks for `pytest-super-kernel:default-<other hash>`, a tag only one test of this
module makes and removes (the comment names the test).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from pytest_super.cli import main as cli
from pytest_super.kernels.docker.engine import docker_client_for
from pytest_super.kernels.docker.image import default_image_tag, host_ca_bundle, image_exists
from pytest_super.kernels.docker.registry import registry_address, remote_name
from tests.support.projects import make_project, run_pytest, sleep_then_answer, task_yaml
from tests.support.registry_server import RegistryServer, free_port, running_registry


def test_a_registry_address_is_host_and_port() -> None:
    for good in ("127.0.0.1:5000", "registry.example.org:443", "[::1]:5000", "reg:1"):
        assert registry_address(good) == good
    for bad in ("http://127.0.0.1:5000", "127.0.0.1", "reg:0", "reg:70000", "reg:5000/path", ""):
        with pytest.raises(ValueError, match="expected HOST:PORT"):
            registry_address(bad)
    assert remote_name("reg:5000", "pytest-super-kernel:default-0123456789ab") == (
        "reg:5000/pytest-super-kernel:default-0123456789ab"
    )


def test_a_bad_registry_option_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"expert/a": task_yaml("a", sleep_then_answer(0))})
    code, out = run_pytest(project, "--super-agent=gold", "--super-registry=http://reg:5000")
    assert code == 4, out[-2000:]
    assert "--super-registry" in out and "http://reg:5000" in out and "HOST:PORT" in out


def test_push_with_a_bad_registry_is_a_usage_error(capsys) -> None:
    assert cli(["image", "push", "--registry", "no-port"]) == 2
    assert "--registry 'no-port'" in capsys.readouterr().err


@pytest.fixture
def throwaway(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch
) -> Iterator[tuple[str, dict[str, str]]]:
    """(a default kernel tag only this test uses, the environment that makes a run ask for it);
    the tag is removed afterwards. The bundle's extra line names the test: two tests of this module
    running at once on two xdist workers must not share a tag (CI of stop 35: one removed the tag
    the other had just built, and both failed)."""
    bundle = host_ca_bundle()
    assert bundle is not None
    other = tmp_path / "ca-bundle.pem"
    mark = f"\n# pytest-super registry test copy for {request.node.nodeid}\n"
    other.write_bytes(bundle.read_bytes() + mark.encode())
    monkeypatch.setenv("SSL_CERT_FILE", str(other))
    tag = default_image_tag()
    monkeypatch.undo()
    assert tag != default_image_tag()
    client = docker_client_for(None)
    yield tag, {"SSL_CERT_FILE": str(other)}
    if image_exists(client, tag):
        client.api.remove_image(tag)


@pytest.mark.docker
def test_push_then_a_run_pulls_the_missing_image_instead_of_building(
    image: str, throwaway: tuple[str, dict[str, str]], tmp_path: Path, monkeypatch, capsys
) -> None:
    tag, env = throwaway
    client = docker_client_for(None)
    client.api.tag(image, *tag.rsplit(":", 1))  # the copy: the kernel image under the other tag
    with running_registry() as registry:
        monkeypatch.setenv("SSL_CERT_FILE", env["SSL_CERT_FILE"])  # push's default tag: the copy
        assert cli(["image", "push", "--registry", registry.address]) == 0
        monkeypatch.undo()
        said = capsys.readouterr().out.splitlines()
        assert said[-1] == remote_name(registry.address, tag)  # the last line: what was pushed
        assert not image_exists(client, remote_name(registry.address, tag))  # pushed, untagged
        client.api.remove_image(tag, noprune=True)
        assert not image_exists(client, tag)
        project = make_project(
            tmp_path, {f"expert/p{i}": task_yaml(f"p{i}", sleep_then_answer(0)) for i in range(2)}
        )
        code, out = run_pytest(
            project,
            "--super-agent=gold",
            f"--super-registry={registry.address}",
            "-p",
            "no:cacheprovider",
            env=env,
            timeout=300,
        )
    assert code == 0, out[-3000:]
    assert "2 passed" in out
    assert "failed" not in out and "building" not in out
    pulled = client.images.get(tag)
    assert pulled.id == client.images.get(image).id  # the pushed image itself, not a build
    assert not image_exists(client, remote_name(registry.address, tag))  # only the local name


@pytest.mark.docker
@pytest.mark.slow
def test_a_failed_pull_falls_back_to_building_said_once(
    image: str, throwaway: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    tag, env = throwaway
    client = docker_client_for(None)
    down = RegistryServer(port=free_port())  # configured, never started: nothing listens
    try:
        project = make_project(
            tmp_path, {f"expert/f{i}": task_yaml(f"f{i}", sleep_then_answer(0)) for i in range(3)}
        )
        code, out = run_pytest(
            project,
            "--super-agent=gold",
            f"--super-registry={down.address}",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            env=env,
            timeout=900,
        )
    finally:
        down.close()
    assert code == 0, out[-3000:]
    assert "3 passed" in out
    said = f"pulling the kernel image {tag} from the registry {down.address} failed"
    assert out.count(said) == 1, out[-3000:]
    assert "connection refused" in out and "building it instead" in out
    labels = client.api.inspect_image(tag)["Config"]["Labels"]
    assert labels["pytest-super.inputs"] == tag[-12:]  # built here, from its own inputs
    assert client.images.get(tag).id != client.images.get(image).id


@pytest.mark.docker
def test_push_of_an_image_the_engine_lacks_or_to_a_registry_that_is_down(
    image: str, capsys
) -> None:
    address = f"127.0.0.1:{free_port()}"
    absent = f"pytest-super-none:{uuid.uuid4().hex[:12]}"  # no other test's
    assert cli(["image", "push", "--registry", address, "--tag", absent]) == 1
    assert f"'{absent}' is not on the engine" in capsys.readouterr().err
    assert cli(["image", "push", "--registry", address]) == 1
    err = capsys.readouterr().err
    assert f"pushing {remote_name(address, image)} failed" in err
    assert not image_exists(docker.from_env(), remote_name(address, image))
