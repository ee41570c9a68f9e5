"""Which images under our names we trust: the ones this machine built, pushed or verified.

An image is named by its tag, which anyone can point anywhere, and carries labels, which anyone
can set. Neither says what it holds. Its image id (`sha256:` of its config, which names every
layer by the digest of its content) does, and a registry hands it over unchanged (the pulled
image's id is the pushed one's). So trust is a record of (tag, image id) pairs, kept in this
user's private folder (`pytest_super.locks.private_dir()`, mode 0700) and written only when

- `build_image` built the image here (kernels/docker/image.py),
- `push_image` pushed it from this machine's engine (kernels/docker/registry.py),
- the reaper's image was built here from its minimal context (kernels/docker/reaper.py).

A pull from a registry is accepted only when the pulled image's id is recorded for its tag;
anything else is refused before it is tagged, so no container ever starts from it. The record is
one empty-named file per pair, so processes write it at once without a lock.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import docker.errors

from pytest_super.locks import private_dir, secure_folder

TRUST_DIR = "trusted-images"


def _folder() -> Path:
    base = private_dir()
    return secure_folder(base / TRUST_DIR, trusted_base=base)


def _entry(tag: str, image_id: str) -> str:
    return hashlib.sha256(f"{tag}\n{image_id}".encode()).hexdigest()


def record(tag: str, image_id: str) -> None:
    """Trust `image_id` under `tag` from now on (it was built, pushed or verified here)."""
    path = _folder() / _entry(tag, image_id)
    path.write_text(f"{tag}\n{image_id}\n")


def trusted(tag: str, image_id: str) -> bool:
    """Was `image_id` recorded under `tag`?"""
    return bool(image_id) and (_folder() / _entry(tag, image_id)).is_file()


def recorded() -> list[tuple[str, str]]:
    """Every (tag, image id) this machine trusts: what a cluster's nodes are told to trust too
    (the controller is the user's own; a node's record is empty until then)."""
    found = []
    for path in sorted(_folder().iterdir()):
        lines = path.read_text(errors="replace").split("\n") if path.is_file() else []
        whole = len(lines) >= 2 and bool(lines[0]) and lines[1].startswith("sha256:")
        if whole and path.name == _entry(lines[0], lines[1]):  # a file of ours, not a stray one
            found.append((lines[0], lines[1]))
    return found


def image_id(api: Any, name: str) -> str | None:  # Any: docker-py (inspect_image untyped)
    """The id (`sha256:...`) of the engine's image `name` (a tag or an id); None if absent."""
    try:
        found = api.inspect_image(name)
    except docker.errors.NotFound:
        return None
    value = found.get("Id") if isinstance(found, dict) else None
    return value if isinstance(value, str) and value else None


def record_present(api: Any, tag: str) -> str | None:  # Any: docker-py (as image_id)
    """Record the engine's image under `tag` as trusted; its id (None if the engine lacks it)."""
    found = image_id(api, tag)
    if found is not None:
        record(tag, found)
    return found
