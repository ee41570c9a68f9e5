"""Issue 45's done-when: a script, with no pytest imported, runs two demo tasks with `run_tasks`
on the test cluster (`executor="ray"`: `RayExecutor`, below pytest), leaves a run folder that
`pytest-super html` renders, and nothing of its run is left on the nodes (no container on their
engines, no task or lock folder).

On the session's test cluster (tests/support/ray_fixtures.py): the script runs in the cluster's
network namespace, where the controller's DOCKER_HOST answers nothing, so a task that ran here
instead of on a node would end in an error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pytest_super.cli import main as cli_main
from tests.support.ray_fixtures import CLUSTER_TESTS
from tests.test_ray_faults import _files, _nothing_left

pytestmark = CLUSTER_TESTS

ROOT = Path(__file__).resolve().parent.parent
#: two of the demo's gold tasks that slow least under load (benchmarks/bench_demo_gold.py: 43-49 s
#: at load 15-22 where hmm-tagger and bow-sentiment took 86-89 s); the ini's git mirrors serve
#: their repositories
DEMO_PAIR = ("tasks/expert/tabular-mlp.yaml", "tasks/expert/charlm-ngram.yaml")

SCRIPT = """\
import json, sys
from pathlib import Path
from pytest_super import SuperRun, load_tasks, run_tasks

root, reports = Path(sys.argv[1]), sys.argv[2]
run = SuperRun.resolve(rootdir=root, agent="gold", executor="ray", report_dir=reports)
tasks = [task for name in sys.argv[3:] for task in load_tasks(root / name)]
results = run_tasks(tasks, run)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pytest", "_pytest", "xdist"))
print(json.dumps({"run_dir": str(run.run_dir), "run_id": run.run_id, "pytest_modules": loaded,
                  "results": sorted([r.task.id, r.exit_status.value, r.accuracy]
                                    for r in results)}))
"""


def test_a_script_runs_demo_tasks_on_the_cluster_and_cleans_up(cluster, tmp_path):
    # the mirrors the ini names: made here, not left to whichever pytest run with --super-agent
    # came first (the root conftest.py makes them then)
    from tests.support.demo_gold import mirrors

    mirrors.build_mirrors(ROOT / ".super-cache" / "mirrors")
    before = _files(cluster)
    reports = tmp_path / "reports"
    done = cluster.run(
        [sys.executable, "-c", SCRIPT, str(ROOT), str(reports), *DEMO_PAIR],
        cwd=ROOT,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["pytest_modules"] == []  # the script's process loaded no pytest
    assert got["results"] == [
        ["charlm-ngram", "submitted", 1.0],
        ["tabular-mlp", "submitted", 1.0],
    ], done.stderr[-5000:]
    run_dir = Path(got["run_dir"])
    records = [json.loads(line) for line in (run_dir / "results.jsonl").open()]
    assert sorted(r["task_id"] for r in records) == ["charlm-ngram", "tabular-mlp"]
    assert all(r["outcome"] == "passed" and r["node"] for r in records), records
    for record in records:  # each trajectory came back from its node into the run's folder
        assert (reports.parent / record["trajectory"]).is_file(), record["trajectory"]
    (run_dir / "index.html").unlink()
    assert cli_main(["html", str(run_dir)]) == 0  # `pytest-super html` renders it again
    page = (run_dir / "index.html").read_text()
    assert "charlm-ngram" in page and "tabular-mlp" in page
    _nothing_left(cluster, got["run_id"], before)  # the node's record of trusted images aside


NO_CLUSTER = """\
import sys
from pathlib import Path
from pytest_super import SuperRun, load_tasks, run_tasks
from pytest_super.executors.ray.connect import RayUnavailable

root = Path(sys.argv[1])
run = SuperRun.resolve(rootdir=root, agent="gold", executor="ray", ray_address="127.0.0.1:9",
                       backend="local",  # were it run here: no container
                       report_dir=sys.argv[2])
try:
    run_tasks(load_tasks(root / "tasks/expert/hmm-tagger.yaml"), run)
except RayUnavailable as exc:
    print(exc)
    sys.exit(3)
"""


def test_a_script_whose_cluster_does_not_answer_is_told_so_and_runs_nothing(tmp_path):
    """No cluster at the address: `run_tasks` raises `RayUnavailable` saying so, before the
    run's folder is made and before any task runs (here or anywhere)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", NO_CLUSTER, str(ROOT), str(tmp_path / "reports")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr[-3000:]
    assert "--super-ray-address 127.0.0.1:9: no Ray cluster answers there" in done.stdout
    assert not (tmp_path / "reports").exists()
