"""The Docker backend's own settings: declared here (`SETTINGS`, the settings only Docker reads,
as executors declare theirs), read back from `KernelSettings.options` by `docker_options`.
Nothing here imports the Docker SDK: the settings package reads `SETTINGS` for every run."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pytest_super.kernels.base import BackendSetting, KernelSettings

#: HOST:PORT, the host a name, an IPv4 address or a bracketed IPv6 address
_ADDRESS = re.compile(
    r"^(?P<host>[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})$"
)


def registry_address(value: str) -> str:
    """`--super-registry` / `--registry`: HOST:PORT (no scheme, no path), port 1-65535."""
    match = _ADDRESS.match(value.strip())
    if match is None or not 1 <= int(match["port"]) <= 65535:
        raise ValueError(
            "expected HOST:PORT of a Docker registry, e.g. 127.0.0.1:5000 or "
            "registry.example.org:443 (no http://, no path)"
        )
    return value.strip()


def _text(value: str) -> str:
    return value


#: the settings only the Docker backend reads (`DockerBackend.settings`; the settings package
#: finds them here through `settings.providers.BUILTIN_BACKEND_SETTINGS`)
SETTINGS: tuple[BackendSetting, ...] = (
    BackendSetting(
        "registry",
        registry_address,
        None,
        "a Docker registry the kernel image was pushed to (`pytest-super image push --registry "
        "HOST:PORT`): an engine without the image pulls it from there before building it",
        metavar="HOST:PORT",
    ),
    BackendSetting(
        "docker_host",
        _text,
        None,
        "Docker engine address (default DOCKER_HOST)",
        engine_address=True,
    ),
    BackendSetting(
        "pip_cache",
        _text,
        None,
        "docker volume shared by task containers as pip's cache (mounted only for the gold "
        "agent: see docs/security.md)",
        untrusted="pip cache volume {value!r} not mounted: with --super-agent={agent} task "
        "code is untrusted and could poison what later tasks install; only the gold agent "
        "shares the cache (docs/security.md)",
    ),
)


@dataclass(frozen=True)
class DockerOptions:
    """The Docker backend's options.

    `docker_host`: the engine's address (`--super-docker-host`; None: DOCKER_HOST or the local
    socket). `pip_cache`: a docker volume shared by task containers as pip's cache
    (`--super-pip-cache`; the settings drop it for an untrusted agent). `pids_limit`: the bound
    on a container's processes. `channel`: how the controller reaches a kernel's sockets: "mount"
    (a host folder bind-mounted into the box; the engine must share this host's filesystem),
    "relay" (through the engine's own connection), "auto" (relay for an engine on another
    machine, else mount); the last two are no command-line option, only `KernelSettings.options`.
    `registry`: HOST:PORT of a registry the kernel image was pushed to (`--super-registry`); an
    engine without the image pulls it from there before building it. `trusted_images`: the
    (tag, image id) pairs the controller trusts (`trust.py`), given to a Ray node so that a
    pull there may match them. `build`, `base`, `offline`: `prepare` builds the image (`pytest-super
    image build`, on each node with `--ray`) from `base` (None: the profile's), `offline`."""

    registry: str | None = None
    docker_host: str | None = None
    pip_cache: str | None = None
    pids_limit: int = 1024
    channel: Literal["auto", "mount", "relay"] = "auto"
    trusted_images: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    build: bool = False
    base: str | None = None
    offline: bool = False


def _option_text(options: Mapping[str, object], name: str) -> str | None:
    value = options.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"the Docker backend's option {name!r} is {value!r}: expected a string")
    return value or None


def _pairs(options: Mapping[str, object], name: str) -> tuple[tuple[str, str], ...]:
    value = options.get(name) or ()
    pairs = tuple(tuple(pair) for pair in value) if isinstance(value, list | tuple) else None
    if pairs is None or not all(len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs):
        raise ValueError(
            f"the Docker backend's option {name!r} is {value!r}: expected (tag, image id) pairs"
        )
    return tuple((tag, image_id) for tag, image_id in pairs)


def _pids_limit(options: Mapping[str, object]) -> int:
    value = options.get("pids_limit", 1024)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"the Docker backend's option 'pids_limit' is {value!r}: expected a whole number >= 1"
        )
    return value


def _channel(options: Mapping[str, object]) -> Literal["auto", "mount", "relay"]:
    value = options.get("channel", "auto")
    if value == "mount" or value == "relay" or value == "auto":
        return value
    raise ValueError(
        f"the Docker backend's option 'channel' is {value!r}: expected 'auto', 'mount' or 'relay'"
    )


def docker_options(settings: KernelSettings) -> DockerOptions:
    """The Docker options in `settings.options`; ValueError naming the option whose value is not
    of its type."""
    options = settings.options
    return DockerOptions(
        registry=_option_text(options, "registry"),
        docker_host=_option_text(options, "docker_host"),
        pip_cache=_option_text(options, "pip_cache"),
        pids_limit=_pids_limit(options),
        channel=_channel(options),
        trusted_images=_pairs(options, "trusted_images"),
        build=bool(options.get("build", False)),
        base=_option_text(options, "base"),
        offline=bool(options.get("offline", False)),
    )
