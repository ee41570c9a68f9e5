"""Round three of attacks on what a run reads (issue 24): a 524-byte YAML alias bomb, a landmark
whose compiling needs gigabytes, and NaN/Infinity in an answer or a submission."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_super.errors import TaskFileError
from pytest_super.tasks import load_yaml_task
from tests.support.attack_runs import PEAK_KB
from tests.support.projects import SOLUTION_AGENT, write_solution_agent

ANSWER_X1 = """\
id: {id}
query: 'Report x as a json structured as follows: {{"x": 0}}.'
answer: {{x: 1}}
solution:
  - execute: |
      print('{{"x": 1}}')
"""


def alias_bomb() -> str:
    """Nine nested levels of nine aliases each inside the answer (a free mapping): 9**9 (387
    million) strings from about 520 bytes."""
    lines = [
        "id: bomb",
        "set: expert",
        "query: q",
        "answer:",
        '  a0: &a0 ["lol"' + ',"lol"' * 8 + "]",
    ]
    for level in range(1, 9):
        lines.append(f"  a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    (pytester.path / "tasks" / "expert").mkdir(parents=True)
    (pytester.path / "tasks" / "expert" / "ok.yaml").write_text(ANSWER_X1.format(id="ok"))
    return pytester


def _strict(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# -- 1. the YAML alias bomb ------------------------------------------------------------------------
def test_an_alias_bomb_is_a_load_error_in_well_under_a_second(tmp_path: Path) -> None:
    """Red on 636b730: loading it did not end (collection still running after 120 s)."""
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    assert path.stat().st_size < 600
    started = time.monotonic()
    with pytest.raises(TaskFileError, match="aliases") as error:
        load_yaml_task(path)
    assert time.monotonic() - started < 30  # the expansion does not end (120 s seen, still going)
    assert str(path) in str(error.value)


def test_an_alias_bomb_beside_a_good_task_does_not_stop_the_run(project) -> None:
    (project.path / "tasks" / "expert" / "bomb.yaml").write_text(alias_bomb())
    started = time.monotonic()
    result = project.runpytest_subprocess(
        "--super-agent=gold", "--super-backend=local", timeout=120
    )
    assert time.monotonic() - started < 60
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*bomb.yaml*aliases*"])


def test_aliases_that_stand_for_a_few_values_still_load(tmp_path: Path) -> None:
    path = tmp_path / "anchors.yaml"
    path.write_text(
        "id: anchors\nset: expert\nquery: q\nanswer: &a {x: 1}\nsolution:\n"
        "  - execute: &cell print(1)\n  - execute: *cell\n"
    )
    task = load_yaml_task(path)
    assert [c.code for c in task.solution] == ["print(1)", "print(1)"]


# -- 2. a landmark whose compiling needs gigabytes ---------------------------------------------------
def test_a_landmark_of_nested_counted_repeats_is_refused_at_load(tmp_path: Path) -> None:
    """Red on 636b730: accepted at load; the scorer's `regex` then took 6.7 GB and 26 s here."""
    path = tmp_path / "lm.yaml"
    path.write_text(ANSWER_X1.format(id="lm") + "set: expert\nlandmarks: ['(?:a{5000}){5000}']\n")
    with pytest.raises(TaskFileError, match="landmark 0 repeats more than") as error:
        load_yaml_task(path)
    assert "(?:a{5000}){5000}" in str(error.value) and str(path) in str(error.value)


SCORING_RSS = (
    """
import warnings
from pytest_super.scoring import check_landmarks
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    score, missed = check_landmarks(["(?:a{5000}){5000}", "done"], ["a" * 10000 + " done"])
print(score, len(missed), any("counts as not hit" in str(w.message) for w in caught))
print("""
    + PEAK_KB
    + """)
"""
)


def test_such_a_landmark_scores_as_not_hit_and_the_harness_stays_small() -> None:
    """A task made in code (no load check) reaches the scorer: the landmark is not hit, with a
    warning, and the scoring process's peak RSS stays under 400 MB (measured, not assumed)."""
    done = subprocess.run(
        [sys.executable, "-c", SCORING_RSS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdict, peak_kb = done.stdout.split("\n")[:2]
    assert verdict == "0.5 1 True"
    print(f"scoring peak RSS {int(peak_kb) // 1024} MB")
    assert int(peak_kb) < 400 * 1024, f"peak RSS {int(peak_kb) // 1024} MB"


# -- 13. NaN and Infinity --------------------------------------------------------------------------
NAN_TASK = """\
id: nan
query: 'Report x and y as {"x": 0, "y": 0}.'
answer: {x: 1, y: 2}
solution:
  - execute: |
      print('{"x": NaN, "y": Infinity}')
"""


def test_nan_and_infinity_are_written_as_strict_json(project) -> None:
    """Red on 636b730: the trajectory held bare `NaN`/`Infinity`, which strict readers refuse."""
    (project.path / "tasks" / "expert" / "nan.yaml").write_text(NAN_TASK)
    write_solution_agent(project.path)  # not gold: a gold miss is an error, with no submission
    result = project.runpytest_subprocess(
        f"--super-agent={SOLUTION_AGENT}", "--super-backend=local"
    )
    result.assert_outcomes(passed=1, failed=1)
    (run_dir,) = (project.path / "reports").iterdir()
    written = [run_dir / "results.jsonl", *run_dir.glob("trajectories/*")]
    assert len(written) == 5  # results.jsonl, and two trajectories as JSON and notebook
    for path in written:
        text = path.read_text()
        if path.suffix == ".jsonl":
            for line in text.splitlines():
                _strict(line)
        else:
            _strict(text)
    trajectory = _strict((run_dir / "trajectories" / "nan.json").read_text())
    assert trajectory["info"]["submission"] == {"x": "NaN", "y": "Infinity"}
    (nan,) = [
        json.loads(ln)
        for ln in (run_dir / "results.jsonl").read_text().splitlines()
        if '"nan"' in ln
    ]
    assert nan["accuracy"] == 0.0  # scoring ran on the values: NaN matches nothing


# -- 14. SIGKILL while a trajectory is written -----------------------------------------------------
WRITER = """
import sys
from pathlib import Path
from pytest_super.trajectory import Step, Trajectory
t = Trajectory(path=Path(sys.argv[1]), task_id="big", query="q", agent="gold")
t.save()
big = "x" * 23_000_000
for n in range(1000):
    print(n, flush=True)
    t.append(Step(thought="t", action="execute", content="c", output=big))
"""


def test_a_trajectory_killed_while_it_is_written_is_still_json(tmp_path: Path) -> None:
    """Red on 636b730: a SIGKILL during the append of a 23 MB step left the file truncated."""
    import random
    import signal

    path = tmp_path / "big.json"
    rng = random.Random(24)
    for _ in range(12):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        for _ in range(rng.randint(2, 3)):
            writer.stdout.readline()  # a step is being written now
        time.sleep(rng.uniform(0.0, 0.1))
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        data = json.loads(path.read_text())
        assert data["task_id"] == "big" and all(s["thought"] == "t" for s in data["steps"])


# -- 15. symbolic links ------------------------------------------------------------------------------
SHADOW = (
    "root:$6$NOTAREALHASHxyz$abcdefghijklmnop:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
)


def test_symlinked_task_files_are_collected_and_a_link_out_of_the_project_is_never_read(
    project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Red on 636b730: a symlinked task file in the tasks folder was silently not collected, and
    a link to a shadow-like file named on the command line had its root line quoted into
    results.jsonl and JUnit by the load error."""
    outside = tmp_path_factory.mktemp("outside") / "shadow"
    outside.write_text(SHADOW)
    expert = project.path / "tasks" / "expert"
    (project.path / "shared").mkdir()
    (project.path / "shared" / "real.yaml").write_text(ANSWER_X1.format(id="real"))
    (expert / "linked.yaml").symlink_to(project.path / "shared" / "real.yaml")
    (expert / "again.yaml").symlink_to(expert / "ok.yaml")  # the same task twice: left out
    (expert / "shadow.yaml").symlink_to(outside)
    junit = project.path / "junit.xml"
    for args in (["tasks"], ["tasks", "tasks/expert/shadow.yaml"]):
        result = project.runpytest_subprocess(
            *args, "--super-agent=gold", "--super-backend=local", f"--junitxml={junit}"
        )
        result.assert_outcomes(passed=2, errors=1)  # ok and linked pass; shadow is an error
        out = result.stdout.str() + result.stderr.str()
        assert "shadow.yaml: is a symbolic link to" in out and "outside the project" in out
        assert "again.yaml: a symbolic link to" in out and "is left out" in out
        written = [junit.read_text(), out]
        written += [p.read_text() for p in (project.path / "reports").rglob("*.jsonl")]
        assert not any("root:" in text or "NOTAREALHASH" in text for text in written)


def test_a_yaml_error_quotes_a_short_excerpt_only(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("id: x\nquery: [unclosed " + "y" * 300 + "\n")
    with pytest.raises(TaskFileError) as error:
        load_yaml_task(path)
    assert "y" * 41 not in str(error.value)
