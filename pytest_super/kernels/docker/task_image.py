"""The image a task's own Dockerfile describes (`base.ImageSpec`: an LMR-Bench folder), made for
our kernel: the docker backend's `prepare_image`.

Two builds, each cached by the hash of what goes into it:

1. **The task's own image** (`pytest-super-task-own:<folder>-<12 hex>`): its Dockerfile, as its
   authors wrote it, with its build args, from its folder. The context sent is the folder less
   its `.dockerignore` patterns and the spec's `exclude` (the golden files: upstream's `COPY . .`
   would put them in the box). Each base its `FROM` lines name (global `ARG`s and build args
   filled in) must be on the engine or pulled first: one the engine cannot get is an
   `EnvironmentFault` naming it, before anything is built.
2. **Our kernel layer on it** (`pytest-super-task:<folder>-<12 hex>`, `Dockerfile.task` FROM the
   first): back to root (upstream's images end as an unprivileged `user`; our kernels run as the
   box's root, with its capabilities dropped, as in every image of ours), the host's CA bundle
   and its variables, `python` on PATH, ipykernel in the image's own Python when it lacks it
   (the task's packages stay importable from the kernel), /content and /etc/pytest-super. The
   colab profile is built FROM the default image the same way.

Both run under the build lock (`image.build_lock`): parallel workers wait for one build and then
find the image. The hash is of the context's files (path, executable bit, content), the
Dockerfile's path, the build args, and for the layer its Dockerfile, the CA bundle and the task
image's hash; it is computed once per process and spec.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.utils.build
import requests.exceptions

from pytest_super.errors import EnvironmentFault, InfrastructureError
from pytest_super.kernels.base import ImageSpec, KernelSettings
from pytest_super.kernels.docker import trust
from pytest_super.kernels.docker.engine import docker_client
from pytest_super.kernels.docker.image import build_lock, ca_bundle_bytes, image_exists, image_file
from pytest_super.scratch import scratch_folder

OWN_REPOSITORY = "pytest-super-task-own"
KERNEL_REPOSITORY = "pytest-super-task"
LAYER_DOCKERFILE = "Dockerfile.task"
#: the build output lines an error message shows
TAIL_LINES = 20


@functools.lru_cache(maxsize=256)
def task_image_tags(spec: ImageSpec) -> tuple[str, str]:
    """(the task's own image, our kernel layer on it): their tags, computed without the engine."""
    own = hashlib.sha256()
    for part in (spec.dockerfile, *(f"{k}={v}" for k, v in spec.build_args)):
        own.update(len(part).to_bytes(8, "big") + part.encode())
    root = Path(spec.context)
    for name in context_files(spec):
        path = root / name
        own.update(len(name).to_bytes(8, "big") + name.encode())
        if path.is_symlink():
            own.update(b"link:" + os.readlink(path).encode())
        elif path.is_file():
            own.update(b"x" if os.access(path, os.X_OK) else b"-")
            own.update(hashlib.sha256(path.read_bytes()).digest())
    own_hex = own.hexdigest()[:12]
    layer = hashlib.sha256()
    for blob in (own_hex.encode(), image_file(LAYER_DOCKERFILE).encode(), ca_bundle_bytes()):
        layer.update(len(blob).to_bytes(8, "big") + blob)
    slug = re.sub(r"[^a-z0-9_.-]+", "-", root.name.lower()).strip(".-")[:60] or "task"
    return (
        f"{OWN_REPOSITORY}:{slug}-{own_hex}",
        f"{KERNEL_REPOSITORY}:{slug}-{layer.hexdigest()[:12]}",
    )


def context_files(spec: ImageSpec) -> list[str]:
    """The paths of the context that go to the build, sorted (files and folders)."""
    root = Path(spec.context)
    patterns = [*_dockerignore(root), *spec.exclude]
    return sorted(docker.utils.build.exclude_paths(str(root), patterns, spec.dockerfile))


def _dockerignore(root: Path) -> list[str]:
    path = root / ".dockerignore"
    if not path.is_file():
        return []
    lines = path.read_text(errors="replace").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def base_images(spec: ImageSpec) -> list[str]:
    """The images the Dockerfile's `FROM` lines name, variables filled in from its global `ARG`s
    and the build args; a stage of its own, `scratch`, and a name still holding a variable are
    left out (the build itself reports those)."""
    text = (Path(spec.context) / spec.dockerfile).read_text(errors="replace")
    text = re.sub(r"\\\n", " ", text)
    given = dict(spec.build_args)
    values: dict[str, str] = {}
    stages: set[str] = set()
    bases: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        keyword = words[0].upper()
        if keyword == "ARG" and not bases and not stages and len(words) > 1:
            name, _, default = words[1].partition("=")
            values[name] = given.get(name, default)
        elif keyword == "FROM":
            rest = [w for w in words[1:] if not w.startswith("--")]
            if not rest:
                continue
            image = re.sub(
                r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                lambda m: values.get(m.group(1), m.group(0)),
                rest[0],
            )
            if len(rest) >= 3 and rest[1].upper() == "AS":
                stages.add(rest[2].lower())
            if image.lower() not in stages and image != "scratch" and "$" not in image:
                bases.append(image)
    return list(dict.fromkeys(bases))


def prepare_task_image(
    settings: KernelSettings, spec: ImageSpec, *, log: Callable[[str], None] = lambda line: None
) -> str:
    """Make our kernel's image of `spec` present on the engine (built once, under the build
    lock, unless its tag exists) and return its tag."""
    dockerfile = Path(spec.context) / spec.dockerfile
    if not dockerfile.is_file():
        raise EnvironmentFault(f"the task's Dockerfile {dockerfile} does not exist")
    own, kernel = task_image_tags(spec)
    client = docker_client(settings)
    try:
        if image_exists(client, kernel):
            return kernel
        with build_lock():
            if image_exists(client, kernel):  # another worker built it meanwhile
                return kernel
            if not image_exists(client, own):
                for base in base_images(spec):
                    _get_base(client, base, dockerfile, log)
                _build_own(client, spec, own, log)
            _build_layer(client, own, kernel, log)
            trust.record_present(client.api, kernel)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise InfrastructureError(
            f"the engine failed while making the image of {dockerfile}: {exc}"
        ) from exc
    return kernel


def _get_base(
    client: docker.DockerClient, base: str, dockerfile: Path, log: Callable[[str], None]
) -> None:
    if image_exists(client, base):
        return
    log(f"pulling {base}")
    try:
        client.images.pull(base)
    except (docker.errors.APIError, docker.errors.ImageNotFound) as exc:
        detail = getattr(exc, "explanation", None) or str(exc)
        raise EnvironmentFault(
            f"the base image {base!r} of {dockerfile} is not on the engine and cannot be pulled "
            f"({detail}); pull it where the engine reaches its registry (LMR-Bench's PyTorch "
            "bases come from Docker Hub), or give every task an image with --super-image"
        ) from None


def _build_own(
    client: docker.DockerClient, spec: ImageSpec, tag: str, log: Callable[[str], None]
) -> None:
    log(f"building {tag} from {spec.context}/{spec.dockerfile}")
    with tempfile.TemporaryFile(prefix="pytest-super-task-context-") as context:
        docker.utils.build.create_archive(spec.context, files=context_files(spec), fileobj=context)
        _stream(
            client,
            f"{spec.context}/{spec.dockerfile}",
            fileobj=context,
            custom_context=True,
            dockerfile=spec.dockerfile,
            tag=tag,
            buildargs=dict(spec.build_args),
            labels={"pytest-super.task-image": "own"},
            log=log,
        )


def _build_layer(
    client: docker.DockerClient, own: str, tag: str, log: Callable[[str], None]
) -> None:
    log(f"building {tag} (our kernel) FROM {own}")
    with scratch_folder("pytest-super-task-layer-") as folder:
        (folder / "Dockerfile").write_text(image_file(LAYER_DOCKERFILE))
        (folder / "ca-bundle.crt").write_bytes(ca_bundle_bytes())
        _stream(
            client,
            f"our kernel layer on {own}",
            path=str(folder),
            tag=tag,
            buildargs={"BASE": own},
            labels={"pytest-super.task-image": "kernel", "pytest-super.base": own},
            log=log,
        )


def _stream(
    client: docker.DockerClient,
    what: str,
    *,
    log: Callable[[str], None],
    **build: Any,  # Any: docker-py's build() keywords
) -> None:
    """Run one build, its output to `log`; a failed step is an `EnvironmentFault` with its tail."""
    tail: list[str] = []
    for chunk in client.api.build(rm=True, forcerm=True, decode=True, **build):
        text = str(chunk.get("stream", "")).rstrip("\n")
        if text.strip():
            log(text)
            tail = (tail + [text])[-TAIL_LINES:]
        if "error" in chunk:
            raise EnvironmentFault(
                f"building {what} failed: {str(chunk['error']).strip()}\n" + "\n".join(tail)
            )
