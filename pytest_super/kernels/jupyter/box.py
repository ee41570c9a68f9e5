"""Where one kernel process lives: the *deployment* half of a backend (a local subprocess, a Docker
container), which `JupyterKernel` (runtime.py) drives over the Jupyter protocol."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class Box(Protocol):
    """Where one kernel process lives; starts, restarts and removes it (the *deployment* half)."""

    description: str

    def connection_info(self) -> Mapping[str, object]:
        """jupyter_client connection dict reachable from this host (ip, transport, ports, key)."""
        ...

    def is_alive(self) -> bool:
        """Is the kernel process alive? Cheap: polled about once a second while waiting."""
        ...

    def restart(self) -> Mapping[str, object]:
        """Start a new kernel process in the same box (files stay); return its connection info."""
        ...

    def detach(self) -> str:
        """Leave the box running; return how a person gets in (commands)."""
        ...

    def remove(self) -> None:
        """Stop and delete the box. Idempotent; never raises for an already-gone box."""
        ...

    def death_reason(self) -> str:
        """Why the kernel process died, e.g. "exit code 1", "killed (out of memory)"; "" if unknown."""
        ...

    def check_limits(self) -> None:
        """Measure the box against its limits now (at an episode's end: a limit watched in the
        background may not have been measured since the last cell); raise the `EpisodeEnd` of a
        limit it went over."""
        ...
