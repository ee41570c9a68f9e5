"""Kernel images through a registry: `pytest-super image push` and `--super-registry`.

Build once, push, every node pulls. `push_image` tags the kernel image `HOST:PORT/<its tag>`
(the content-addressed tag unchanged: `HOST:PORT/pytest-super-kernel:default-<hex>`) and pushes
it. `provide_image` makes an image a task needs present on an engine: nothing when it is there;
else, with a registry, a pull of `HOST:PORT/<tag>` retagged to the local name the rest of the code
expects (`<tag>`); a pull that fails falls back to building (our own images only), and the reason
is returned once for the caller to say once (a warning, one console line), not per task.

A registry on 127.0.0.1 needs no TLS: the engine allows plain HTTP to loopback registries. Any
other address needs TLS or an `insecure-registries` entry in each engine's daemon.json
(docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import docker
import docker.errors

from pytest_super.errors import InfrastructureError
from pytest_super.kernels.base import KernelSettings, PreparedImage
from pytest_super.kernels.docker import trust
from pytest_super.kernels.docker.engine import docker_client_for
from pytest_super.kernels.docker.image import (
    BUILD_COMMAND,
    IMAGE_REPOSITORY,
    INPUTS_LABEL,
    build_image,
    build_inputs,
    build_lock,
    image_exists,
    image_for_task,
)
from pytest_super.kernels.docker.reaper import REAPER_REPOSITORY
from pytest_super.kernels.docker.settings import docker_options
from pytest_super.kernels.docker.settings import registry_address as registry_address  # the CLI's

_SAID: set[str] = set()  # the fallback reasons this process has said (warn_once)


def remote_name(registry: str, tag: str) -> str:
    """The image's name in the registry: `HOST:PORT/<repository>:<tag>`, the tag unchanged."""
    return f"{registry}/{tag}"


def _split(name: str) -> tuple[str, str]:
    repository, _, tag = name.rpartition(":")
    return repository, tag


def push_image(
    client: docker.DockerClient, tag: str, registry: str, *, log: Callable[[str], None] = print
) -> str:
    """Push the engine's image `tag` to `registry` as `HOST:PORT/<tag>`; return that name."""
    if not image_exists(client, tag):
        raise InfrastructureError(
            f"the image {tag!r} is not on the engine; build it first with `{BUILD_COMMAND}`"
        )
    remote = remote_name(registry, tag)
    repository, version = _split(remote)
    client.api.tag(tag, repository, version)
    try:
        log(f"pushing {remote}")
        for chunk in client.api.push(repository, tag=version, stream=True, decode=True):
            if "error" in chunk:
                raise InfrastructureError(
                    f"pushing {remote} failed: {chunk['error'].strip()}. Is a registry listening "
                    f"at {registry}? A registry not on 127.0.0.1 needs TLS or an "
                    "insecure-registries entry in the engine's daemon.json (docs/cluster.md)."
                )
    except docker.errors.APIError as exc:
        raise InfrastructureError(f"pushing {remote} failed: {exc.explanation or exc}") from exc
    finally:
        _untag(client, remote)
    trust.record_present(client.api, tag)  # what this engine holds under it: pulls may match it
    log(f"pushed {remote}")
    return remote


def pull_image(
    client: docker.DockerClient, tag: str, registry: str, *, log: Callable[[str], None] = print
) -> str | None:
    """Pull `HOST:PORT/<tag>` and tag it `tag`; None when done, else why it failed. An image under
    one of our repositories is tagged only when its image id is one this machine built or pushed
    (`trust`); any other is refused, its registry name removed, and never tagged or run."""
    remote = remote_name(registry, tag)
    repository, version = _split(remote)
    log(f"pulling {remote}")
    try:
        for chunk in client.api.pull(repository, tag=version, stream=True, decode=True):
            if "error" in chunk:
                return str(chunk["error"]).strip()
        pulled = trust.image_id(client.api, remote)
        if pulled is None:
            return f"the engine did not hold {remote} after the pull"
        refused = _refusal(client, tag, remote, pulled, registry)
        if refused:
            return refused
        client.api.tag(pulled, *_split(tag))  # by id: what was checked is what is tagged
    except docker.errors.DockerException as exc:
        explanation = getattr(exc, "explanation", None)
        return str(explanation or exc).strip()
    finally:
        _untag(client, remote)
    if not image_exists(client, tag):
        return f"the engine did not hold {tag} after the pull"
    return None


def ours(tag: str) -> bool:
    """Is `tag` under one of the repositories we build (the kernel's, the reaper's)?"""
    return _split(tag)[0] in (IMAGE_REPOSITORY, REAPER_REPOSITORY)


def _refusal(client: docker.DockerClient, tag: str, remote: str, pulled: str, registry: str) -> str:
    """Why the pulled image may not stand under `tag` ("" when it may): under our repositories
    only an image id recorded by a build or push of this machine is accepted; the refused image
    is removed unless something else names it."""
    if not ours(tag) or trust.trusted(tag, pulled):
        return ""
    labels = (client.api.inspect_image(pulled).get("Config") or {}).get("Labels") or {}  # type: ignore[no-untyped-call]
    said = labels.get(INPUTS_LABEL)
    expected = tag.rpartition("-")[2]
    label = (
        f"its {INPUTS_LABEL} label is {said!r}, not {expected!r}"
        if said != expected
        else f"its {INPUTS_LABEL} label matches, but a label proves nothing"
    )
    with contextlib.suppress(docker.errors.DockerException):
        client.api.remove_image(remote)  # the name, and the image when nothing else names it
    return (
        f"refused the registry's image {remote} (image id {pulled[:19]}): it is not an image "
        f"this machine built or pushed ({label}). Push the image from a machine that built it "
        f"(`pytest-super image push --registry {registry}`) and pull from there, or build it "
        "here; see docs/security.md"
    )


def _untag(client: docker.DockerClient, name: str) -> None:
    """Remove the registry's name of an image (the image stays under its local tag)."""
    with contextlib.suppress(docker.errors.DockerException):
        client.api.remove_image(name, noprune=True)


@dataclass(frozen=True)
class Provided:
    """How an image came to be on an engine for a task."""

    image: str
    how: str  # "present" (there, or made meanwhile by another task), "pulled", "built", "missing"
    seconds: float = 0.0
    #: why a pull from the registry failed (then it was built, or is missing), for saying once
    fallback: str = ""


def provide_image(
    tag: str,
    *,
    registry: str | None,
    profile: str | None,
    docker_host: str | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> Provided:
    """Make `tag` present on the engine: pull it from `registry` (when given), else build it when
    `profile` names our own image's profile (None: not ours, nothing is built). Concurrent tasks
    of one machine wait for one pull or build (the build lock) and then find the image there."""
    client = docker_client_for(docker_host)
    if image_exists(client, tag):
        return Provided(tag, "present")
    started = time.monotonic()
    fallback = ""
    if registry:
        with build_lock():
            if image_exists(client, tag):
                return Provided(tag, "present")
            problem = pull_image(client, tag, registry, log=log)
        if problem is None:
            return Provided(tag, "pulled", time.monotonic() - started)
        fallback = (
            f"pulling the kernel image {tag} from the registry {registry} failed ({problem}); "
            + ("building it instead" if profile else "it is not built here (not ours)")
        )
    if profile is None:
        return Provided(tag, "missing", time.monotonic() - started, fallback)
    said: list[str] = []
    build_image(profile=profile, tag=tag, docker_host=docker_host, log=said.append)
    if any("nothing to build" in line for line in said):
        return Provided(tag, "present", 0.0, fallback)
    return Provided(tag, "built", time.monotonic() - started, fallback)


def own_profile(tag: str, profile: str) -> str | None:
    """`profile` when `tag` is that profile's default image (ours to build), else None."""
    return profile if tag == build_inputs(profile=profile).tag() else None


def prepare_kernel_image(settings: KernelSettings, profile: str) -> PreparedImage | None:
    """`DockerBackend.prepare`: the kernel image of a task of image `profile` made present on
    the engine of `settings` (`provide_image`: pulled from the `registry` option when given, else
    built when it is our profile's own image). None for an image not ours without a registry
    (named with --super-image: it must be on the engine already, its kernel's start says so)."""
    options = docker_options(settings)
    for tag, image_id in options.trusted_images:  # what the controller trusts, trusted here too
        trust.record(tag, image_id)
    if options.build:  # `pytest-super image build` (`--ray`: on each node)
        started, said = time.monotonic(), list[str]()
        built = build_image(
            profile=profile,
            base=options.base,
            offline=options.offline,
            tag=settings.image,
            docker_host=options.docker_host,
            log=said.append,
        )
        if any("nothing to build" in line for line in said):
            return PreparedImage(built, "present")
        return PreparedImage(built, "built", time.monotonic() - started)
    image = image_for_task(profile, settings.image)
    registry = options.registry
    own = own_profile(image, profile)
    if own is None and not registry:
        return None
    provided = provide_image(image, registry=registry, profile=own, docker_host=options.docker_host)
    how = _HOW.get(provided.how, "present")
    return PreparedImage(provided.image, how, provided.seconds, provided.fallback)


#: `Provided.how` as `PreparedImage.how`
_HOW: dict[str, Literal["present", "pulled", "built", "missing"]] = {
    "pulled": "pulled",
    "built": "built",
    "missing": "missing",
}


def warn_once(message: str) -> None:
    """A warning this process gives once, however many tasks meet the same cause."""
    if message and message not in _SAID:
        _SAID.add(message)
        warnings.warn(f"pytest-super: {message}", stacklevel=2)


_PROVIDED: set[tuple[str | None, str]] = set()  # (engine, image) this process made sure of


def provide_for_run(
    tag: str, *, registry: str, profile: str | None, docker_host: str | None
) -> Provided | None:
    """A local run's `provide_image`, once per engine and image in this process; a failed pull
    is a warning said once (then the image is built). None: done before."""
    key = (docker_host, tag)
    if key in _PROVIDED:
        return None
    provided = provide_image(tag, registry=registry, profile=profile, docker_host=docker_host)
    _PROVIDED.add(key)
    warn_once(provided.fallback)
    return provided
