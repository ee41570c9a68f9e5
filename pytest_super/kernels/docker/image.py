"""The kernel image: its tag, its build context and its build (`pytest-super image build`).

Owns the image every docker kernel runs in: Python >= 3.10 in a venv at /opt/venv, ipykernel, git,
gcc/make, working directory /content, and the host's CA bundle named by PIP_CERT, SSL_CERT_FILE,
REQUESTS_CA_BUNDLE and GIT_SSL_CAINFO (so `!pip install` and `!git clone` work behind a
TLS-intercepting proxy).

The base is `python:3.10-slim` where a registry answers. Offline, or when that pull fails, the base
is bootstrapped from Debian's package archive with debootstrap and imported as
`pytest-super-base:bookworm` (cached on the engine).

The "colab" profile is SUPER's reference environment (Dockerfile.colab): it is built FROM the
default image, adds the reference's apt packages and replaces the venv with exactly colab.lock
(every package pinned with hashes, made by `lock_colab`); the build fails unless each package of
the reference set imports. docs/environment.md lists where it differs from the reference.

The tag is `pytest-super-kernel:<profile>-<12 hex>`, the hex being a hash of the build inputs
(Dockerfile text, profile, requirements, CA bundle, the base when one is named explicitly, and for
colab its lock, check script and the default image's own hash).
The default tag does not depend on which base was used, so `--super-image` can default to it
without asking the engine; a build whose tag already exists is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import docker
import docker.errors

from pytest_super.errors import InfrastructureError
from pytest_super.kernels.docker import trust
from pytest_super.kernels.docker.engine import docker_client_for
from pytest_super.locks import held_lock, private_dir
from pytest_super.paths import checkout_hint
from pytest_super.scratch import scratch_folder

IMAGE_REPOSITORY = "pytest-super-kernel"
DEFAULT_BASE = "python:3.10-slim"
OFFLINE_BASE = "pytest-super-base:bookworm"
DEBOOTSTRAP_SUITE = "bookworm"
DEBOOTSTRAP_PACKAGES = "python3,python3-venv,python3-pip,ca-certificates,git"
PROFILES = ("default", "colab")
BUILD_COMMAND = "pytest-super image build"
#: the label naming the hash of the build inputs (the tag's last part); informative only: anyone
#: can set a label, so trust goes by image id (kernels/docker/trust.py)
INPUTS_LABEL = "pytest-super.inputs"
MAKE_TARGETS = {"default": "make image", "colab": "make image-colab"}
# The colab profile's files (pytest_super/kernels/docker/image_context/): the reference's top-level set, what the
# harness adds, the lock resolved from both, and the build check.
COLAB_REQUIREMENTS = "requirements-colab.txt"
COLAB_HARNESS = "requirements-colab-harness.txt"
COLAB_LOCK = "colab.lock"
COLAB_INSTALLER = "colab-installer.lock"
#: the build lock's name in `pytest_super.locks.private_dir()`
BUILD_LOCK = "image-build.lock"
COLAB_CHECK = "check_colab.py"
# Transitive pins are resolved as PyPI stood on this date: the reference set's own pins are of
# spring 2024 (transformers 4.40.2 and tqdm 4.66.4 are of May 2024), and a later resolution pulls
# NumPy-2-era wheels (pyarrow, ...) that break against its numpy==1.25.2.
COLAB_LOCK_DATE = "2024-06-01"
# python:3.10-slim (a registry) or bookworm's 3.11 (offline): the lock holds for both.
COLAB_LOCK_PYTHON = "3.10"
PYPI_INDEX = "https://pypi.org/simple"
CA_BUNDLE_CANDIDATES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT")
SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


@dataclass(frozen=True)
class BuildInputs:
    """Everything that goes into the build context, and the hash that names it."""

    dockerfile: str
    requirements: str
    ca_bundle: bytes
    profile: str
    base: str | None  # only an explicitly chosen base counts in the hash
    files: tuple[tuple[str, str], ...] = ()  # more context files (name, text): colab's lock, ...
    parent: BuildInputs | None = None  # the image this one is built FROM (colab: the default)

    def digest(self) -> str:
        h = hashlib.sha256()
        more: list[bytes] = []  # empty for the default profile: its digest is of the parts below
        for name, text in self.files:
            more += [b"file", name.encode(), text.encode()]
        if self.parent is not None:
            more += [b"parent", self.parent.digest().encode()]
        for part in (
            b"dockerfile",
            self.dockerfile.encode(),
            b"requirements",
            self.requirements.encode(),
            b"ca-bundle",
            self.ca_bundle,
            b"profile",
            self.profile.encode(),
            b"base",
            (self.base or "").encode(),
            *more,
        ):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
        return h.hexdigest()[:12]

    def tag(self) -> str:
        return f"{IMAGE_REPOSITORY}:{self.profile}-{self.digest()}"


def image_file(name: str) -> str:
    return (
        resources.files("pytest_super.kernels.docker")
        .joinpath("image_context")
        .joinpath(name)
        .read_text()
    )


def ca_bundle_bytes() -> bytes:
    """The CA bundle an image of ours carries: the host's (`host_ca_bundle`), else certifi's."""
    bundle = host_ca_bundle()
    return (bundle or _base_ca_fallback()).read_bytes()


def host_ca_bundle() -> Path | None:
    """The first CA bundle of SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, the system one, that exists."""
    for var in CA_BUNDLE_CANDIDATES:
        value = os.environ.get(var)
        if value and Path(value).is_file():
            return Path(value)
    system = Path(SYSTEM_CA_BUNDLE)
    return system if system.is_file() else None


def build_inputs(
    *, profile: str = "default", requirements: Path | None = None, base: str | None = None
) -> BuildInputs:
    """Collect the build inputs for a profile (plus an optional extra requirements file)."""
    if profile not in PROFILES:
        raise InfrastructureError(
            f"unknown image profile {profile!r}; choose one of {', '.join(PROFILES)}"
        )
    colab = profile == "colab"
    reqs = ""  # the extra packages (--requirements); colab's own set is one of its files
    if requirements is not None:
        path = Path(requirements)
        if not path.is_file():
            raise InfrastructureError(
                f"requirements file {str(path)!r} does not exist; pass an existing pip requirements file"
            )
        reqs += f"\n# from {path.name}\n" + path.read_text()
    if colab:  # built FROM the default image; an explicit base is the default image's base
        parent = build_inputs(base=base)
        return BuildInputs(
            dockerfile=image_file("Dockerfile.colab"),
            requirements=reqs,
            ca_bundle=parent.ca_bundle,
            profile=profile,
            base=None,
            files=tuple(
                (name, image_file(name))
                for name in (COLAB_REQUIREMENTS, COLAB_LOCK, COLAB_INSTALLER, COLAB_CHECK)
            ),
            parent=parent,
        )
    bundle = host_ca_bundle()
    return BuildInputs(
        dockerfile=image_file("Dockerfile"),
        requirements=reqs,
        ca_bundle=bundle.read_bytes() if bundle else b"",
        profile=profile,
        base=base,
    )


def default_image_tag(profile: str = "default") -> str:
    """The tag `pytest-super image build --profile PROFILE` produces; computed without the engine."""
    return build_inputs(profile=profile).tag()


def image_for_task(profile: str, override: str | None = None) -> str:
    """The image a task runs in: `override` (--super-image) if given, else its profile's tag."""
    return override or default_image_tag(profile)


def build_hint(tag: str) -> str:
    """How to build `tag` when it is one of ours (for the error that says it is missing)."""
    for profile in PROFILES:
        if tag.startswith(f"{IMAGE_REPOSITORY}:{profile}-"):
            option = "" if profile == "default" else f" --profile {profile}"
            return f"`{BUILD_COMMAND}{option}`{checkout_hint(MAKE_TARGETS[profile], 'Makefile')}"
    return f"`{BUILD_COMMAND}`{checkout_hint('make image', 'Makefile')}"


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    """Does the engine hold an image with this tag (or id)?"""
    try:
        client.api.inspect_image(tag)  # type: ignore[no-untyped-call]  # unannotated in types-docker
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.NotFound:
        return False
    return True


def build_image(
    *,
    base: str | None = None,
    tag: str | None = None,
    requirements: Path | None = None,
    offline: bool = False,
    profile: str = "default",
    docker_host: str | None = None,
    log: Callable[[str], None] = print,
) -> str:
    """Build the kernel image unless an image with its tag exists; return the tag.

    `base` None means `python:3.10-slim`, falling back to a debootstrapped Debian base when the
    pull fails; `offline=True` goes straight to the debootstrapped base. An explicit `base` that
    cannot be found or pulled is an error. The colab profile builds (or reuses) the default image
    first and is built FROM it; `base` is then the default image's base.
    """
    inputs = build_inputs(profile=profile, requirements=requirements, base=base)
    tag = tag or inputs.tag()
    client = docker_client_for(docker_host)
    if image_exists(client, tag):
        log(f"image {tag} exists; nothing to build")
        return tag
    parent = None
    if inputs.parent is not None:  # before the lock: building the parent takes the lock itself
        parent = build_image(base=base, offline=offline, docker_host=docker_host, log=log)
    with _build_lock():  # parallel workers (pytest-xdist) wait for one build instead of racing
        if image_exists(client, tag):
            log(f"image {tag} was built meanwhile; nothing to build")
            return tag
        chosen_base = parent or _resolve_base(client, base, offline=offline, log=log)
        _build(client, inputs, tag=tag, base=chosen_base, profile=profile, log=log)
        trust.record_present(client.api, tag)  # built here: a pull of it is accepted
    return tag


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """One build at a time among this user's processes; the lock lives in a folder only the user
    can write (`pytest_super.locks`), so a file planted under its name cannot block a build."""
    with held_lock(private_dir(), BUILD_LOCK):
        yield


#: the build lock, for a pull from a registry (registry.py) that must not race a build either
build_lock = _build_lock


def _build(
    client: docker.DockerClient,
    inputs: BuildInputs,
    *,
    tag: str,
    base: str,
    profile: str,
    log: Callable[[str], None],
) -> None:
    if not inputs.ca_bundle:
        log(
            "warning: no CA bundle found on this host (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, "
            f"{SYSTEM_CA_BUNDLE}); the image will use its own certificates"
        )
    log(f"building {tag} from {base} (profile {profile})")
    with scratch_folder("pytest-super-build-") as ctx:
        (ctx / "Dockerfile").write_text(inputs.dockerfile)
        (ctx / "requirements.txt").write_text(inputs.requirements)
        for name, text in inputs.files:
            (ctx / name).write_text(text)
        if inputs.ca_bundle:
            (ctx / "ca-bundle.crt").write_bytes(inputs.ca_bundle)
        else:
            shutil.copyfile(_base_ca_fallback(), ctx / "ca-bundle.crt")
        _run_build(
            client,
            path=str(ctx),
            tag=tag,
            buildargs={"BASE": base},
            labels={
                "pytest-super.image": "1",
                "pytest-super.profile": profile,
                INPUTS_LABEL: inputs.digest(),
                "pytest-super.base": base,
            },
            log=log,
        )
    log(f"built {tag}")


def _base_ca_fallback() -> Path:
    # No bundle on the host: an empty file keeps the Dockerfile's COPY valid, but then the env vars
    # would point at an empty bundle. Use certifi's bundle (pip's own) when present.
    try:
        import certifi

        return Path(certifi.where())
    except (
        ImportError
    ) as exc:  # pragma: no cover - certifi ships with requests, a docker dependency
        raise InfrastructureError(
            "no CA bundle on this host; set SSL_CERT_FILE to a PEM bundle and build again"
        ) from exc


def _run_build(
    client: docker.DockerClient,
    *,
    path: str,
    tag: str,
    buildargs: dict[str, str],
    labels: dict[str, str],
    log: Callable[[str], None],
) -> None:
    tail: list[str] = []
    for chunk in client.api.build(
        path=path,
        tag=tag,
        buildargs=buildargs,
        labels=labels,
        rm=True,
        forcerm=True,
        decode=True,
    ):
        if "stream" in chunk:
            text = chunk["stream"].rstrip("\n")
            if text.strip():
                log(text)
                tail = (tail + [text])[-30:]
        if "error" in chunk:
            detail = "\n".join(tail[-20:])
            raise InfrastructureError(
                f"building image {tag} failed: {chunk['error'].strip()}\n{detail}\n"
                f"Fix the cause above and run `{BUILD_COMMAND}`{checkout_hint('make image', 'Makefile')} "
                "again."
            )


def _resolve_base(
    client: docker.DockerClient, base: str | None, *, offline: bool, log: Callable[[str], None]
) -> str:
    if base is not None:
        if image_exists(client, base):
            return base
        if offline:
            raise InfrastructureError(
                f"base image {base!r} is not on the engine and --offline forbids pulling it; "
                "drop --base to use a debootstrapped Debian base"
            )
        try:
            log(f"pulling {base}")
            client.images.pull(base)
        except docker.errors.APIError as exc:
            raise InfrastructureError(
                f"cannot pull base image {base!r}: {exc.explanation or exc}; "
                "drop --base (or pass --offline) to bootstrap a Debian base instead"
            ) from exc
        return base

    if not offline:
        if image_exists(client, DEFAULT_BASE):
            return DEFAULT_BASE
        try:
            log(f"pulling {DEFAULT_BASE}")
            client.images.pull(DEFAULT_BASE)
            return DEFAULT_BASE
        except docker.errors.APIError as exc:
            log(
                f"cannot pull {DEFAULT_BASE} ({exc.explanation or exc}); using a Debian base instead"
            )
    return ensure_offline_base(client, log=log)


def ensure_offline_base(
    client: docker.DockerClient,
    *,
    log: Callable[[str], None] = print,
    tag: str = OFFLINE_BASE,
    suite: str = DEBOOTSTRAP_SUITE,
) -> str:
    """Make `tag` from Debian's archive with debootstrap unless the engine has it; return the tag."""
    if image_exists(client, tag):
        return tag
    debootstrap = _find_debootstrap(log)
    rootfs = Path(tempfile.mkdtemp(prefix="pytest-super-rootfs-", dir=_scratch_dir()))
    tarball = rootfs.with_suffix(".tar")
    try:
        log(f"bootstrapping Debian {suite} into {rootfs} (about a minute)")
        command = [
            debootstrap,
            "--variant=minbase",
            f"--include={DEBOOTSTRAP_PACKAGES}",
            suite,
            str(rootfs),
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise InfrastructureError(
                f"`{' '.join(command)}` failed (exit {done.returncode}):\n"
                f"{(done.stdout + done.stderr)[-3000:]}\n"
                "Check that Debian's archive (http://deb.debian.org) is reachable, or pull "
                f"{DEFAULT_BASE} from a registry and build without --offline."
            )
        log(f"importing {rootfs} as {tag}")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        repository, _, version = tag.partition(":")
        client.api.import_image(src=str(tarball), repository=repository, tag=version or "latest")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
        tarball.unlink(missing_ok=True)
    if not image_exists(client, tag):
        raise InfrastructureError(f"importing the bootstrapped base as {tag} did not create it")
    return tag


def _scratch_dir() -> str:
    # /var/tmp is disk-backed where /tmp may be a small tmpfs; the rootfs is ~420 MB.
    return "/var/tmp" if os.access("/var/tmp", os.W_OK) else tempfile.gettempdir()


def _find_debootstrap(log: Callable[[str], None]) -> str:
    found = shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None
    )
    if found:
        return found
    if os.geteuid() != 0:
        raise InfrastructureError(
            "debootstrap is needed to make an offline base image but is not installed, and "
            "installing it needs root: run `sudo apt-get install -y debootstrap`"
            f"{checkout_hint('sudo scripts/ensure-docker.sh', 'scripts/ensure-docker.sh')}, or "
            "build with a registry: "
            f"`{BUILD_COMMAND}` without --offline"
        )
    log("installing debootstrap with apt-get")
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "debootstrap"]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise InfrastructureError(
                f"`{' '.join(command)}` failed (exit {done.returncode}): {done.stderr[-2000:]}"
            )
    found = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    if not Path(found).exists():
        raise InfrastructureError("apt-get installed debootstrap but it is not on PATH")
    return found


def lock_command(out: Path) -> list[str]:
    """The `uv pip compile` command that makes colab.lock (uv from PATH; `make image-colab-lock`)."""
    here = Path(str(resources.files("pytest_super.kernels.docker").joinpath("image_context")))
    uv = shutil.which("uv")
    if uv is None:
        raise InfrastructureError(
            "making the lock needs uv: `pip install uv`"
            + checkout_hint("make image-colab-lock", "Makefile")
        )
    return [
        uv,
        "pip",
        "compile",
        str(here / COLAB_REQUIREMENTS),
        str(here / COLAB_HARNESS),
        "--universal",
        f"--python-version={COLAB_LOCK_PYTHON}",
        f"--exclude-newer={COLAB_LOCK_DATE}",
        f"--index-url={PYPI_INDEX}",
        "--generate-hashes",
        "--no-annotate",
        "--custom-compile-command=make image-colab-lock",
        f"--output-file={out}",
    ]


def lock_colab(out: Path | None = None, *, log: Callable[[str], None] = print) -> Path:
    """Resolve the colab profile once into its lock (every package pinned, with hashes)."""
    target = out or Path(
        str(
            resources.files("pytest_super.kernels.docker")
            .joinpath("image_context")
            .joinpath(COLAB_LOCK)
        )
    )
    command = lock_command(target)
    bundle = host_ca_bundle()
    env = {**os.environ, **({"SSL_CERT_FILE": str(bundle)} if bundle else {})}
    log(" ".join(command))
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise InfrastructureError(
            f"resolving the colab lock failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    return target
