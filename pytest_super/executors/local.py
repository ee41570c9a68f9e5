"""The `local` executor (the default): each task runs in this process, or in the xdist worker that
collected it. The plugin runs the task itself (plugin.py `_run_here`), so nothing is started
and no outcome is asked of this executor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_super.runner import TaskResult


class LocalExecutor:
    """Tasks run here: no connection to start, no outcome to fetch from elsewhere."""

    remote = False

    def configure(self, config: Any) -> None:
        """Any pytest options go (xdist's `-n` spreads tasks over this machine's workers)."""

    def start(self, config: Any) -> None:
        """Nothing to connect to."""

    def outcome(self, config: Any, run: Any, item: Any) -> tuple[TaskResult, str]:
        raise RuntimeError(
            "the local executor runs each task in the pytest process: nothing comes back from "
            f"elsewhere for {getattr(item, 'nodeid', item)!r}"
        )
