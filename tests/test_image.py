"""The kernel image: its tag from the build inputs, the cached offline build, and what is inside."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import docker
import pytest

from pytest_super.cli import main as cli
from pytest_super.errors import InfrastructureError
from pytest_super.kernels.docker.engine import docker_client_for
from pytest_super.kernels.docker.image import (
    build_image,
    build_inputs,
    default_image_tag,
    host_ca_bundle,
    image_exists,
)

TAG_RE = r"pytest-super-kernel:(default|colab)-[0-9a-f]{12}"


def test_default_tag_is_stable_and_names_profile_and_hash() -> None:
    tag = default_image_tag()
    assert re.fullmatch(TAG_RE, tag)
    assert tag.startswith("pytest-super-kernel:default-")
    assert default_image_tag() == tag
    assert default_image_tag("colab").startswith("pytest-super-kernel:colab-")
    assert default_image_tag("colab")[-12:] != tag[-12:]


def test_tag_follows_the_build_inputs(tmp_path: Path, monkeypatch) -> None:
    default = default_image_tag()
    # an explicit base is a different build; the default base choice is not part of the tag
    assert build_inputs(base="debian:bookworm").tag() != default
    assert build_inputs(base=None).tag() == default
    # extra requirements change it
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("tomli-w==1.0.0\n")
    assert build_inputs(requirements=reqs).tag() != default
    # so does another CA bundle
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert host_ca_bundle() == bundle
    assert default_image_tag() != default


def test_unknown_profile_and_missing_requirements_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(InfrastructureError, match="unknown image profile 'gpu'"):
        default_image_tag("gpu")
    missing = tmp_path / "nope.txt"
    with pytest.raises(InfrastructureError, match=re.escape(str(missing))):
        build_inputs(requirements=missing)


def test_colab_requirements_name_the_reference_packages() -> None:
    reqs = dict(build_inputs(profile="colab").files)["requirements-colab.txt"]
    for pin in ("torch==2.2.1", "transformers==4.40.2", "pandas==2.0.3", "numpy==1.25.2"):
        assert pin in reqs
    assert build_inputs().requirements == ""


def test_the_command_prints_the_tag_without_an_engine(tmp_path: Path, capsys) -> None:
    assert cli(["image", "build", "--print-tag"]) == 0
    assert capsys.readouterr().out == default_image_tag() + "\n"
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("tomli-w==1.0.0\n")
    assert (
        cli(["image", "build", "--print-tag", "--profile", "colab", "--requirements", str(reqs)])
        == 0
    )
    expected = build_inputs(profile="colab", requirements=reqs).tag()
    assert capsys.readouterr().out == expected + "\n"


def test_the_lock_command_without_uv_says_how_to_get_it(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no uv on it
    assert cli(["image", "lock"]) == 2
    assert "making the lock needs uv: `pip install uv`" in capsys.readouterr().err


@pytest.fixture(scope="module")
def built() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture(scope="module")
def client(built: str) -> docker.DockerClient:
    return docker_client_for(None)


@pytest.mark.docker
def test_offline_build_makes_the_default_tag_and_is_cached(built: str, client) -> None:
    assert built == default_image_tag()
    assert image_exists(client, built)
    labels = client.api.inspect_image(built)["Config"]["Labels"]
    assert labels["pytest-super.image"] == "1"
    assert labels["pytest-super.profile"] == "default"
    assert labels["pytest-super.inputs"] == built[-12:]
    lines: list[str] = []
    before = client.images.get(built).id
    started = time.perf_counter()
    assert build_image(offline=True, log=lines.append) == built
    # nothing was built: the same image, and the builder said so (a build from cached layers
    # would take longer, but how much is the machine's load: no bound near it, issue 42)
    assert client.images.get(built).id == before
    assert time.perf_counter() - started < 60
    assert any("nothing to build" in line for line in lines)


@pytest.mark.docker
def test_image_holds_python_tools_and_the_host_ca_bundle(built: str, client) -> None:
    script = (
        "set -e; python -c 'import sys; assert sys.version_info >= (3, 10); import ipykernel'; "
        "git --version; gcc --version | head -1; make --version | head -1; pwd; "
        'for v in PIP_CERT SSL_CERT_FILE REQUESTS_CA_BUNDLE GIT_SSL_CAINFO; do eval echo "$v=\\$$v"; done; '
        "cat $PIP_CERT | sha256sum"
    )
    out = client.containers.run(built, ["bash", "-c", script], remove=True).decode()
    assert "git version" in out and "gcc" in out and "GNU Make" in out
    assert "\n/content\n" in out
    for var in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO"):
        assert f"{var}=/usr/local/share/pytest-super/ca-bundle.crt" in out
    import hashlib

    bundle = host_ca_bundle()
    assert bundle is not None
    assert hashlib.sha256(bundle.read_bytes()).hexdigest() in out


@pytest.mark.docker
def test_a_failing_build_says_what_failed_and_leaves_no_tag(built: str, client, tmp_path) -> None:
    reqs = tmp_path / "bad.txt"  # a line of its own: a tag no other session builds at once
    reqs.write_text(f"# {uuid.uuid4().hex}\npytest-super-no-such-package-zzz==0.0.1\n")
    tag = build_inputs(requirements=reqs).tag()
    with pytest.raises(InfrastructureError) as caught:
        build_image(offline=True, requirements=reqs, log=lambda line: None)
    message = str(caught.value)
    assert tag in message
    assert "pytest-super-no-such-package-zzz" in message
    assert "pytest-super image build" in message
    assert not image_exists(client, tag)


@pytest.mark.docker
def test_explicit_base_that_cannot_be_pulled_is_an_error(built: str) -> None:
    with pytest.raises(InfrastructureError, match="registry.invalid/nothing:1"):
        build_image(base="registry.invalid/nothing:1", log=lambda line: None)
