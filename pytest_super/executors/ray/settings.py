"""The Ray executor's own settings, and how its code reads them from a run.

The Ray code reads its settings through `ray_address(run)` and `ray_concurrency(run)`, and makes the
run of a command that acts on the cluster's nodes with `cluster_run(address, ...)`: how a
`SuperRun` holds them is this module's business. Nothing here imports Ray.
"""

from __future__ import annotations

from typing import Any

from pytest_super.settings import SuperRun

#: --super-ray-address after RAY_ADDRESS: the cluster this machine belongs to
DEFAULT_ADDRESS = "auto"


def ray_address(run: SuperRun) -> str:
    """The cluster's address: --super-ray-address, else RAY_ADDRESS, else "auto"."""
    return run.ray_address or DEFAULT_ADDRESS


def ray_concurrency(run: SuperRun) -> int | None:
    """--super-ray-concurrency: the tasks in flight at once (None: what the cluster can place)."""
    return run.ray_concurrency


def cluster_run(address: str, **fields: Any) -> SuperRun:
    """The run of a command that acts on every node of the cluster at `address` (image build,
    cleanup): the Ray executor's, with `fields` (`kernel=...`)."""
    return SuperRun(ray_address=address, executor="ray", **fields)
