"""The `ray` executor (`--super-executor=ray`): each task runs whole on a node of a Ray cluster
(cluster.py), one pytest process keeps many in flight (session.py). pytest is imported only by
the methods: a node imports `cluster.py`, and so this package, where no pytest runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_super.executors.ray import settings as _settings

if TYPE_CHECKING:
    import pytest

    from pytest_super.runner import TaskResult


class RayExecutor:
    """Tasks run on a Ray cluster's nodes; their outcomes come back to this pytest process."""

    remote = True
    #: --super-ray-address, --super-ray-concurrency (executors/ray/settings.py), and the header's
    #: words on the cluster
    settings = _settings.SETTINGS
    describe = staticmethod(_settings.describe)
    cleanup_options = staticmethod(_settings.cleanup_options)

    def configure(self, config: pytest.Config) -> None:
        """xdist's workers would each submit every task: one pytest process only."""
        import pytest

        from pytest_super import thirdparty

        if thirdparty.requested_workers(config):
            raise pytest.UsageError(
                "--super-executor=ray runs many tasks from one pytest process: drop -n "
                "(pytest-xdist); use --super-ray-concurrency K to bound the tasks in flight"
            )

    def start(self, config: pytest.Config) -> None:
        """Connect before any task runs; no Ray or no cluster is a usage error."""
        import pytest

        from pytest_super.executors.ray.connect import RayUnavailable

        try:
            from pytest_super.executors.ray import session

            session.start(config)
        except RayUnavailable as exc:
            raise pytest.UsageError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the session must end with a sentence, not a trace
            raise pytest.UsageError(
                "--super-executor=ray: could not start on the cluster "
                f"({type(exc).__name__}: {exc})"
            ) from exc

    def outcome(self, config: pytest.Config, run: Any, item: pytest.Item) -> tuple[TaskResult, str]:
        """The episode a node ran for this item: its trajectory written here, its error raised
        here, its deadline passed as the item's own timer says it (`timeouts.TaskTimedOut`)."""
        from pytest_super import timeouts
        from pytest_super.executors.ray import cluster, session

        outcome = session.session_of(config).outcome(item.name)
        item.user_properties.append(("super.node", outcome.node))
        result = cluster.write_outcome(run, outcome)
        if outcome.timed_out_after_s is not None:
            failure = timeouts.TaskTimedOut(outcome.timed_out_after_s)
            failure.retried = outcome.retried
            raise failure
        if result is None:
            cluster.raise_error(outcome)
        assert result is not None
        return result, outcome.node

    def build_on_nodes(
        self, address: str, *, profile: str, base: str | None, offline: bool, tag: str | None
    ) -> list[tuple[str, str]]:
        """`pytest-super image build --executor ray`: built on every live node's engine."""
        from pytest_super.executors.ray.cluster import build_on_nodes

        return build_on_nodes(address, profile=profile, base=base, offline=offline, tag=tag)

    def cleanup_on_nodes(
        self, address: str, settings: Any, run_id: str | None, *, every: bool = False
    ) -> list[str]:
        """`pytest-super cleanup --executor ray`: on every live node, its own engine's."""
        from pytest_super.executors.ray.cluster import cleanup_nodes

        return cleanup_nodes(address, settings, run_id, every)
