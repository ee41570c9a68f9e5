"""Round four of attacks (issue 29, cause 4): results a run did not write itself.

Earlier runs' results.jsonl in the report folder (read by every run's HTML report and by
`--super-resume`), foreign trajectories read by `pytest-super html`, and the results.jsonl and
JUnit files `pytest-super report` reads. Each may be a FIFO, a folder, nested 100,000 deep or mistyped: the bad part is named (file, line,
field) and left out, the rest is read, nothing hangs and this run's own reports are written.
Every command runs in a subprocess with a timeout, so a hang is a failure, not a stuck suite.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from pytest_super import safe_read
from tests.support.attack_runs import DEEP, cli
from tests.support.projects import PASS, make_project, run_dirs, run_pytest, task_yaml

# -- cause 4: pytest-super report --------------------------------------------------------------------
GOOD_LINE = {"task_id": "good", "outcome": "passed", "set": "expert", "accuracy": 1.0}
BAD_LINES = [
    {"task_id": "b1", "outcome": "passed", "set": "expert", "accuracy": "high"},
    {"task_id": "b2", "outcome": "passed", "set": "expert", "prompt_tokens": "Infinity"},
    {"task_id": "b3", "outcome": "passed", "set": "expert", "cost_usd": [1]},
    {"task_id": "b4", "outcome": "passed", "set": "expert", "accuracy": 5},
    {"task_id": "b5", "outcome": "passed", "set": "expert", "landmarks": -0.5},
    {"task_id": "b6", "outcome": "passed", "set": ["expert"]},
    {"task_id": "b7", "outcome": "passed", "set": "expert", "duration_s": "NaN"},
]


def _results_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(GOOD_LINE), *map(json.dumps, BAD_LINES), DEEP]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize("by_task", [False, True], ids=["table", "by-task"])
def test_report_names_and_skips_mistyped_results_lines(tmp_path: Path, by_task: bool) -> None:
    """Red on eb4ffc2: a traceback (float('high'), a NaN mean, float([1]))."""
    results = _results_file(tmp_path / "run" / "results.jsonl")
    done = cli("report", str(results), *(["--by-task"] if by_task else []), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "nan" not in done.stdout.lower(), done.stderr
    for number in range(2, len(BAD_LINES) + 3):
        assert f"{results}:{number}:" in done.stderr, (number, done.stderr)
    for field in ("accuracy", "prompt_tokens", "cost_usd", "landmarks", "set", "duration_s"):
        assert field in done.stderr
    assert ("good" in done.stdout) if by_task else ("100.0" in done.stdout), done.stdout
    assert "b1" not in done.stdout


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="t" name="good"><properties>
<property name="super.set" value="expert"/><property name="super.accuracy" value="1.0"/>
</properties></testcase>
<testcase classname="t" name="bad"><properties>
<property name="super.set" value="expert"/><property name="super.accuracy" value="abc"/>
</properties></testcase>
<testcase classname="t" name="worse"><properties>
<property name="super.set" value="expert"/><property name="super.prompt_tokens" value="inf"/>
</properties><failure message="x"/></testcase>
</testsuite></testsuites>
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("by_task", [False, True], ids=["table", "by-task"])
def test_report_names_and_skips_mistyped_junit_properties(tmp_path: Path, by_task: bool) -> None:
    """Red on eb4ffc2: ValueError traceback on super.accuracy="abc"."""
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    done = cli("report", str(junit), *(["--by-task"] if by_task else []), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"{junit}:6:" in done.stderr and "accuracy" in done.stderr, done.stderr
    assert f"{junit}:9:" in done.stderr and "prompt_tokens" in done.stderr, done.stderr
    assert "bad" not in done.stdout and "worse" not in done.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fifo", "folder"])
@pytest.mark.parametrize("name", ["results.jsonl", "junit.xml"])
def test_report_of_a_file_that_is_not_a_regular_file(tmp_path: Path, kind: str, name: str) -> None:
    """Red on eb4ffc2: a FIFO hung `pytest-super report`, a folder was a traceback."""
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    done = cli("report", str(path), cwd=tmp_path, timeout=30)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert str(path) in done.stderr and "not a regular file" in done.stderr, done.stderr


# -- cause 4: pytest-super html ----------------------------------------------------------------------
def _trajectory(task_id: str, steps: object, observation: object = "hello") -> str:
    if steps is None:
        steps = [
            {"thought": "t", "action": "execute", "content": "print(1)", "observation": observation}
        ]
    return json.dumps({"task_id": task_id, "query": "q", "agent": "x", "steps": steps, "info": {}})


#: task -> its trajectory file's content (None: a FIFO)
TRAJECTORIES: dict[str, str | None] = {
    "good": _trajectory("good", None),
    "deep": '{"task_id": "deep", "steps": ' + DEEP + "}",
    "observation_list": _trajectory("observation_list", None, observation=["a", "b"]),
    "steps_number": _trajectory("steps_number", 7),
    "comparison_text": json.dumps(
        {"task_id": "x", "steps": [], "info": {"comparisons": [{"score": "high"}]}}
    ),
    "fifo": None,
}


def _html_run(folder: Path) -> Path:
    (folder / "trajectories").mkdir(parents=True)
    lines = []
    for task, content in TRAJECTORIES.items():
        path = folder / "trajectories" / f"{task}.json"
        if content is None:
            os.mkfifo(path)
        else:
            path.write_text(content)
        record = {"task_id": task, "outcome": "passed", "set": "expert", "trajectory": str(path)}
        lines.append(json.dumps(record))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.timeout(120)
def test_html_shows_every_task_when_some_trajectories_are_foreign(tmp_path: Path) -> None:
    """Red on eb4ffc2: the deep trajectory (RecursionError), the list observation and the number
    of steps (TypeError) each ended `pytest-super html` with a traceback; the FIFO hung it."""
    run = _html_run(tmp_path / "run")
    done = cli("html", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert (run / "index.html").is_file()
    good = (run / "tasks" / "good.html").read_text()
    assert "print(1)" in good and "no readable trajectory" not in good
    for task in TRAJECTORIES:
        if task != "good":
            page = (run / "tasks" / f"{task}.html").read_text()
            assert "no readable trajectory" in page, task
            assert f"{task}.json" in done.stderr, (task, done.stderr)


@pytest.mark.timeout(120)
def test_html_comparison_never_overwrites_a_runs_own_files(tmp_path: Path) -> None:
    """Red on eb4ffc2: `pytest-super html A B --out A` replaced A's front page with the
    comparison."""
    a = _html_run(tmp_path / "a")
    b = _html_run(tmp_path / "b")
    assert cli("html", str(a), cwd=tmp_path).returncode == 0
    front = (a / "index.html").read_bytes()
    for out in (a, b, tmp_path / "a" / "."):
        done = cli("html", str(a), str(b), "--out", str(out), cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "run folder" in done.stderr and "--out" in done.stderr, done.stderr
        assert (a / "index.html").read_bytes() == front
    done = cli("html", str(a), str(b), "--out", str(tmp_path / "cmp"), cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "cmp" / "index.html").is_file(), done.stderr


# -- cause 4: a run and --super-resume with foreign results in the report folder ---------------------
def _plant_earlier_runs(project: Path, hazard: str) -> None:
    """An earlier run of the same agent whose results.jsonl is `hazard`."""
    path = project / "reports" / f"earlier-{hazard}" / "results.jsonl"
    path.parent.mkdir(parents=True)
    if hazard == "fifo":
        os.mkfifo(path)
    elif hazard == "folder":
        path.mkdir()
    else:  # a mistyped line beside a good one of another task
        good = {"task_id": "other", "outcome": "passed", "set": "expert", "agent": "gold"}
        bad = {"task_id": "t1", "outcome": "passed", "set": "expert", "agent": "gold"}
        bad["accuracy"] = "high"
        path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("resume", [False, True], ids=["run", "resume"])
@pytest.mark.parametrize("hazard", ["fifo", "folder", "mistyped"])
def test_a_run_writes_its_reports_whatever_earlier_runs_left(
    tmp_path: Path, hazard: str, resume: bool
) -> None:
    """Red on eb4ffc2: a FIFO hung the run after its tasks (without --super-resume) or before
    them (with it); a folder was an INTERNALERROR under --super-resume; the mistyped line ended
    the run with exit 1 (a ValueError under --super-resume), with no index.html and no JUnit."""
    project = make_project(tmp_path / "p", {"expert/t1": task_yaml("t1", PASS)})
    _plant_earlier_runs(project, hazard)
    junit = project / "junit.xml"
    args = [
        "--super-agent=gold",
        "--super-backend=local",
        f"--junitxml={junit}",
        "-p",
        "no:cacheprovider",
    ]
    code, output = run_pytest(project, *args, *(["--super-resume"] if resume else []), timeout=180)
    assert code == 0, output
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    assert f"earlier-{hazard}" in output and "results.jsonl" in output, output  # named
    ours = [d for d in run_dirs(project) if not d.name.startswith("earlier-")]
    assert len(ours) == 1, ours
    for name in ("results.jsonl", "summary.md", "index.html"):
        assert (ours[0] / name).is_file(), name
    assert junit.is_file() and 'name="t1"' in junit.read_text()
    record = json.loads((ours[0] / "results.jsonl").read_text().splitlines()[0])
    assert record["task_id"] == "t1" and record["outcome"] == "passed"  # it ran: nothing resumed


# -- the shared reader's depth bound ---------------------------------------------------------------
def _nested(rng: random.Random, depth: int) -> object:
    """A JSON value up to `depth` deep whose strings are made of backslashes, quotes and brackets
    (what could fool a depth count that does not read strings as JSON does)."""
    text = "".join(rng.choice('\\"[]{}a\n') for _ in range(rng.randrange(6)))
    roll = rng.random()
    if depth > 0 and roll < 0.3:
        return [_nested(rng, depth - 1) for _ in range(rng.randrange(3))]
    if depth > 0 and roll < 0.6:
        return {text + str(i): _nested(rng, depth - 1) for i in range(rng.randrange(3))}
    return text


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


def test_the_depth_bound_counts_only_json_nesting() -> None:
    """check_depth agrees with the parsed value's depth on 3,000 values whose strings are full
    of escapes, quotes and brackets; and a 100,000-deep array is refused without parsing it."""
    rng = random.Random(29)
    for _ in range(3000):
        value = _nested(rng, rng.randrange(12))
        text, depth = json.dumps(value), _depth(value)
        safe_read.check_depth(text, depth)
        if depth:
            with pytest.raises(ValueError, match="nested deeper"):
                safe_read.check_depth(text, depth - 1)
    with pytest.raises(ValueError, match="nested deeper than 64"):
        safe_read.check_depth(DEEP)
    with pytest.raises(safe_read.ForeignDataError, match="x.json: not readable JSON"):
        safe_read.loads(DEEP, "x.json")
