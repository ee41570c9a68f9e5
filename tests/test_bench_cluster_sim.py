"""benchmarks/bench_cluster_sim.py: its scheduler on hand-made durations whose answer is known,
its reading of a published notebook's step times, and a run end to end on the repository's data."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_cluster_sim.py"

_spec = importlib.util.spec_from_file_location("bench_cluster_sim", SCRIPT)
sim = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_cluster_sim", sim)  # dataclasses look their module up here
_spec.loader.exec_module(sim)


def test_four_tasks_of_10_s_on_one_node_of_two_slots_take_20_s() -> None:
    placed = sim.schedule([10.0] * 4, nodes=1, slots=2)
    assert [p.start for p in placed] == [0, 0, 10, 10]
    assert sim.wall_time([10.0] * 4, 1, 2) == 20
    assert sim.wall_time([10.0] * 4, 2, 2) == 10
    assert sim.lower_bound([10.0] * 4, 1, 2) == 20


def test_no_slot_runs_two_tasks_at_once_and_nodes_stay_in_range() -> None:
    durations = [float(d) for d in (7, 3, 9, 1, 4, 4, 8, 2, 6, 5, 3, 7)]
    placed = sim.schedule(durations, nodes=3, slots=2)
    assert {p.node for p in placed} == {0, 1, 2} and {p.slot for p in placed} == {0, 1}
    for key in {(p.node, p.slot) for p in placed}:
        runs = sorted((p.start, p.end) for p in placed if (p.node, p.slot) == key)
        assert all(a[1] <= b[0] for a, b in zip(runs, runs[1:], strict=False))
    starts = [p.start for p in placed]
    assert starts == sorted(starts)  # first come, first served


def test_one_long_task_sets_the_wall_time_once_nodes_are_plenty() -> None:
    durations = [100.0] + [1.0] * 60
    assert sim.wall_time(durations, 1, 2) == 100  # 60 s of small tasks fit beside it
    assert sim.wall_time(durations, 1, 1) == 160
    for nodes in (8, 31, 64):
        assert sim.wall_time(durations, nodes, 2) == 100
    # last in the queue it starts late unless there are slots for everything
    late = [1.0] * 60 + [100.0]
    assert sim.wall_time(late, 1, 2) == 130
    assert sim.wall_time(late, 31, 2) == 100
    assert sim.dominance_nodes(late, 2) == 6  # 12 slots: it starts at 5 s, 105 <= 1.05 x 100
    assert sim.dominance_nodes(durations, 2) == 1


def test_fifo_against_longest_first_on_a_known_case() -> None:
    durations = [1.0, 1.0, 1.0, 1.0, 4.0]
    assert sim.wall_time(durations, 1, 2) == 6  # the 4 s task starts at 2 s
    assert sim.wall_time(sim.longest_first(durations), 1, 2) == 4
    assert sim.lower_bound(durations, 1, 2) == 4


def test_in_flight_caps_the_tasks_running_at_once() -> None:
    assert sim.wall_time([10.0] * 4, 2, 2) == 10
    assert sim.wall_time([10.0] * 4, 2, 2, in_flight=2) == 20
    assert sim.lower_bound([10.0] * 4, 2, 2, in_flight=2) == 20
    with pytest.raises(ValueError):
        sim.schedule([1.0], 0, 2)


def _notebook(path: Path, steps: list[tuple[str, str, bool]]) -> Path:
    cells = [{"cell_type": "markdown", "source": ["### Query\n", "x"]}]
    for i, (start, end, pre) in enumerate(steps, 1):
        cells += [
            {"cell_type": "markdown", "source": [f"### Step {i}"]},
            {
                "cell_type": "markdown",
                "source": [f"Execution Start time: {start}, End time: {end} (duration: 0 seconds)"],
            },
            {
                "cell_type": "markdown",
                "source": ["**Thought**: [pre-executed by user]" if pre else "**Thought**: go"],
            },
            {"cell_type": "code", "source": ["!ls"], "outputs": []},
        ]
    path.mkdir(parents=True)
    (path / "history.ipynb").write_text(json.dumps({"cells": cells}))
    return path / "history.ipynb"


def test_step_times_are_read_across_midnight_and_split_into_cells_and_model(tmp_path) -> None:
    notebook = _notebook(
        tmp_path / "run" / "task_goal",
        [
            ("23:59:50", "23:59:55", True),  # pre-executed: 5 s of cell
            ("23:59:55", "00:00:05", True),  # 10 s, across midnight
            ("00:00:08", "00:01:08", False),  # 3 s of model, 60 s of cell
            ("00:01:10", "00:01:10", False),  # 2 s of model (the submission)
        ],
    )
    episode = sim.read_episode(notebook)
    assert episode.task_id == "task_goal" and episode.midnight_wraps == 1
    assert [s.cell_s for s in episode.steps] == [5, 10, 60, 0]
    assert [s.pre_executed for s in episode.steps] == [True, True, False, False]
    assert episode.model_gaps == [3, 2] and episode.cell_s == 75 and episode.wall_s == 80

    d = sim.task_duration(episode, sim.Params(start_s=2.0), first_call_s=7.0)
    assert (d.seconds, d.cell_s, d.model_s, d.ended_by_limit) == (82, 75, 5, False)
    d = sim.task_duration(episode, sim.Params(start_s=0.0, model_scale=2.0), first_call_s=7.0)
    assert d.seconds == 85  # only model time scales: 75 + 0 + 2 x 5
    # over a 12 s limit after the two pre-executed cells: no model call, nothing more
    d = sim.task_duration(episode, sim.Params(compute_limit_s=12.0, start_s=0.0), 7.0)
    assert (d.seconds, d.ended_by_limit, d.cut_s) == (15, True, 65)

    agent_first = sim.read_episode(
        _notebook(tmp_path / "run" / "expert", [("10:00:00", "10:00:04", False)])
    )
    d = sim.task_duration(agent_first, sim.Params(start_s=1.0), first_call_s=3.0)
    assert d.seconds == 8  # 1 s start + the unrecorded first call (3 s) + 4 s of cell


def test_the_script_runs_end_to_end_on_the_repository_data() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "| set | nodes N | slots N×8 | FIFO wall (h:mm) |" in out
    for label in ("all three", "Auto", "Expert", "Masked"):
        assert f"| {label} | 64 | 512 |" in out
    assert "Masked 144 published + 8 drawn" in out

    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--nodes", "1,4", "--repeats", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["sets"]["all"]["tasks"] == 2 * (45 + 152 + 604)
    rows = result["sets"]["all"]["rows"]
    assert rows[0]["fifo_s"] >= rows[1]["fifo_s"] >= rows[1]["lower_bound_s"]
    longest = result["sets"]["expert"]["longest_s"]
    assert longest <= 1800 + 300 + 600  # compute limit + one cell + model time and start
