"""A kernel backend that breaks one rule of the contract, for tests/test_conformance.py: its
kernels' `restart` keeps the namespace (nothing is restarted), where `Kernel.restart` must start
a fresh kernel process. Everything else is the local backend's, so the conformance suite must
fail exactly `test_restart_gives_a_fresh_namespace_and_keeps_files`.

    pytest --pyargs pytest_super.conformance \
        --super-backend tests.support.broken_backend:StickyRestartBackend
"""

from __future__ import annotations

from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.kernels.local import LocalBackend
from tests.support.example_backend import RecordingKernel


class StickyRestartKernel(RecordingKernel):
    """A local kernel whose restart does nothing."""

    def restart(self) -> None:
        """The broken rule: the kernel process goes on, variables and imports are kept."""


class StickyRestartBackend(LocalBackend):
    """The local backend, its kernels' restart broken (see the module docstring)."""

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        return StickyRestartKernel(super().provision(settings, task_id=task_id), 0)
