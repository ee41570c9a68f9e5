"""The Docker backend's own settings, as it reads them from `KernelSettings.options` (the values
of the settings only Docker reads, by name): `docker_options(settings)` gives them typed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_super.kernels.base import KernelSettings


@dataclass(frozen=True)
class DockerOptions:
    """The Docker backend's options.

    `registry`: HOST:PORT of a registry the kernel image was pushed to (`--super-registry`); an
    engine without the image pulls it from there before building it. `trusted_images`: the
    (tag, image id) pairs the controller trusts (`trust.py`), given to a Ray node so that a
    pull there may match them. `build`, `base`, `offline`: `prepare` builds the image (`pytest-super
    image build`, on each node with `--ray`) from `base` (None: the profile's), `offline`."""

    registry: str | None = None
    trusted_images: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    build: bool = False
    base: str | None = None
    offline: bool = False


def _text(options: Mapping[str, Any], name: str) -> str | None:
    value = options.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"the Docker backend's option {name!r} is {value!r}: expected a string")
    return value or None


def _pairs(options: Mapping[str, Any], name: str) -> tuple[tuple[str, str], ...]:
    value = options.get(name) or ()
    pairs = tuple(tuple(pair) for pair in value) if isinstance(value, list | tuple) else None
    if pairs is None or not all(len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs):
        raise ValueError(
            f"the Docker backend's option {name!r} is {value!r}: expected (tag, image id) pairs"
        )
    return tuple((tag, image_id) for tag, image_id in pairs)


def docker_options(settings: KernelSettings) -> DockerOptions:
    """The Docker options in `settings.options`; ValueError naming the option whose value is not
    of its type."""
    options = settings.options
    return DockerOptions(
        registry=_text(options, "registry"),
        trusted_images=_pairs(options, "trusted_images"),
        build=bool(options.get("build", False)),
        base=_text(options, "base"),
        offline=bool(options.get("offline", False)),
    )
