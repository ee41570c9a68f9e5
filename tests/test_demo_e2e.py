"""The demo benchmark end to end, as CI runs it: one expert, one masked (with edit cells in its
prefix) and one auto task, with the gold agent, in Docker containers, two xdist workers. Each must
score perfectly, and the run must leave no container behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker.engine import docker_client
from pytest_super.kernels.docker.image import build_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
TASKS = [
    "tasks/expert/tabular-mlp.yaml",
    "tasks/masked/charlm-ngram_data.yaml",
    "tasks/auto/tabular-mlp-sweep.yaml",
]


def test_demo_tasks_pass_with_the_gold_agent_in_containers(tmp_path: Path) -> None:
    build_image(offline=True, log=lambda line: None)
    junit = tmp_path / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *TASKS,
            "--super-agent=gold",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
            f"--super-report-dir={tmp_path}",
            f"--junitxml={junit}",
            "-q",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "3 passed" in proc.stdout
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    results = {
        r["task_id"]: r
        for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    }
    assert set(results) == {"tabular-mlp", "charlm-ngram_data", "tabular-mlp-sweep"}
    for task_id in ("tabular-mlp", "charlm-ngram_data"):
        assert results[task_id]["accuracy"] == 1.0 and results[task_id]["landmarks"] == 1.0, (
            results[task_id]
        )
    assert results["tabular-mlp-sweep"]["script_executed"] == 1.0
    left = docker_client(KernelSettings()).containers.list(
        all=True, filters={"label": f"pytest-super.run={run_dir.name}"}
    )
    assert [c.name for c in left] == []
