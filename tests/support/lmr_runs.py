"""A pytest run of LMR tasks in a pytester project, and what the LMR tests read of it: its
results.jsonl by task id; no container of the run may be left (tests/test_lmr_*.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker.engine import docker_client


def run_lmr(project: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    """Run pytest in `project` with `args` (reports in `reports/`, 1 GB per box); its result and
    its records by task id. Asserts that the run left no container."""
    result = project.runpytest_subprocess(
        *args, "--super-report-dir=reports", "-p", "no:cacheprovider", "--super-mem=1g"
    )
    (run_dir,) = (project.path / "reports").iterdir()
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    records = {r["task_id"]: r for r in map(json.loads, lines)}
    left = docker_client(KernelSettings()).containers.list(
        all=True, filters={"label": f"pytest-super.run={run_dir.name}"}
    )
    assert [c.name for c in left] == []
    return result, records
