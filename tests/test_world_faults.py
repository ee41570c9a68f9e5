"""The world's faults inside a task are named and never charged to the agent (issue 44, item 2;
pytest_super/netfaults.py).

A gold run (the local kernel backend: a real ipykernel, a real `git clone`) of a task whose
repository cannot be cloned (its host does not resolve: `.invalid` never does) is an
environment error with exit status `network_error` in pytest, JUnit, results.jsonl and the HTML
report, not a failure. Any other miss of the expert solution is an `environment_error` whose
message says which: a wrong answer, no answer, a failing cell. The same wrong answer from an
agent that is not gold stays the agent's failure.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field

import pytest

from pytest_super.errors import EnvironmentFault, ExitStatus
from pytest_super.lmr.unit_tests import UnitTestOutcome
from pytest_super.netfaults import network_fault, world_fault
from pytest_super.scoring import Comparison
from pytest_super.trajectory import Action, Step
from tests.support.projects import (
    SOLUTION_AGENT,
    junit_outcomes,
    junit_properties,
    write_solution_agent,
)

CLONE = """\
id: cloner
query: Clone the repository and report how many files it has.
answer: {files: 3}
solution:
  - execute: |
      !git clone https://nonexistent.invalid/super/repo.git
  - execute: |
      import json, os
      print(json.dumps({"files": len(os.listdir("repo"))}))
"""

WRONG = """\
id: wrong
query: Report the score.
answer: {score: 0.5}
solution:
  - execute: |
      print('{"score": 0.75}')
"""

SILENT = """\
id: silent
query: Report the score.
answer: {score: 0.5}
solution:
  - execute: |
      print("trained; the score is in the log")
"""

CRASH = """\
id: crash
query: Report the score.
answer: {score: 0.5}
solution:
  - execute: |
      import json
      score = json.load(open("data/results.json"))["score"]
  - execute: |
      print(json.dumps({"score": score}))
"""


def test_a_gold_run_whose_repository_cannot_be_cloned_is_an_environment_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    tasks = {"cloner": CLONE, "wrong": WRONG, "silent": SILENT, "crash": CRASH}
    for name, text in tasks.items():
        path = pytester.path / "tasks" / "expert" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "tasks",
        "--super-agent=gold",
        "--super-backend=local",
        f"--junitxml={junit}",
        "--super-report-dir=out",
    )
    result.assert_outcomes(errors=4)  # every miss of the expert solution: never a failure
    result.stdout.fnmatch_lines(["*NetworkFault*DNS*Could not resolve host*nonexistent.invalid*"])
    result.stdout.fnmatch_lines(
        [
            "*EnvironmentFault: the expert solution, known to work, failed at step 1 (cell error: "
            "*FileNotFoundError*data/results.json*): the environment broke*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*EnvironmentFault: the expert solution gave no answer (the last solution cell printed "
            "no JSON value); the environment differs from the one the answer was recorded in*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*EnvironmentFault: the expert solution did not reproduce the gold answer: accuracy 0 "
            "(score: expected 0.5, submitted 0.75); the environment differs*",
        ]
    )
    assert junit_outcomes(junit) == {name: "error" for name in tasks}
    statuses = {k: v["super.exit_status"] for k, v in junit_properties(junit).items()}
    assert statuses == {
        "cloner": "network_error",
        "wrong": "environment_error",
        "silent": "environment_error",
        "crash": "environment_error",
    }
    (run_dir,) = (pytester.path / "out").iterdir()
    rows = {
        r["task_id"]: r
        for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    }
    assert rows["cloner"]["outcome"] == "error"
    assert rows["cloner"]["exit_status"] == ExitStatus.NETWORK_ERROR.value
    assert rows["wrong"]["outcome"] == "error"
    assert rows["wrong"]["exit_status"] == ExitStatus.ENVIRONMENT_ERROR.value
    assert "did not reproduce the gold answer" in rows["wrong"]["detail"]
    wrong_page = (run_dir / "tasks" / "wrong.html").read_text()
    assert "environment_error" in wrong_page and "did not reproduce the gold answer" in wrong_page
    index = (run_dir / "index.html").read_text()
    page = (run_dir / "tasks" / "cloner.html").read_text()
    assert "network_error" in page and "cloner" in index
    assert "Could not resolve host" in page and "cloner.ipynb" in page  # the error, the notebook
    assert rows["cloner"]["detail"].startswith("NetworkFault: the network failed")
    trajectory = json.loads((run_dir / "trajectories" / "cloner.json").read_text())
    assert trajectory["info"]["exit_status"] == "network_error"
    assert "Could not resolve host" in trajectory["info"]["detail"]


def test_the_same_wrong_answer_from_an_agent_that_is_not_gold_is_its_failure(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    path = pytester.path / "tasks" / "expert" / "wrong.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(WRONG)
    write_solution_agent(pytester.path)
    result = pytester.runpytest_subprocess(
        "tasks", f"--super-agent={SOLUTION_AGENT}", "--super-backend=local"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*MISS score: expected 0.5, submitted 0.75*"])


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            "fatal: unable to access 'https://github.com/a/b/': Could not resolve host: github.com",
            "DNS",
        ),
        ("socket.gaierror: [Errno -3] Temporary failure in name resolution", "DNS"),
        ("requests.exceptions.ConnectionError: ... Connection refused", "connection"),
        ("ConnectionResetError: [Errno 104] Connection reset by peer", "connection"),
        (
            "WARNING: Retrying (Retry(total=4)) after connection broken by "
            "'NewConnectionError(...)': /simple/numpy/\nERROR: Could not find a version that "
            "satisfies the requirement numpy",
            "connection",
        ),
        ("ssl.SSLError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed", "TLS"),
        ("fatal: unable to access 'x': The requested URL returned error: 503", "HTTP 5xx"),
        ("huggingface_hub.utils._errors.HfHubHTTPError: 502 Server Error: Bad Gateway", "HTTP 5xx"),
    ],
)
def test_network_faults_are_recognised(text: str, kind: str) -> None:
    found = network_fault(text)
    assert found is not None and found.startswith(f"{kind}: "), found


@pytest.mark.parametrize(
    "text",
    [
        "ERROR: Could not find a version that satisfies the requirement no-such-package-xyz",
        "ValueError: could not convert string to float: 'abc'",
        "HTTP 404 Not Found",
        "accuracy 0.503 after 502 steps",
    ],
)
def test_the_agents_own_mistakes_are_not_network_faults(text: str) -> None:
    assert network_fault(text) is None


@dataclass
class _Episode:
    """What `world_fault` reads of a scored episode (runner.TaskResult's fields)."""

    exit_status: ExitStatus = ExitStatus.SUBMITTED
    passed: bool = False
    metric_value: float | None = 0.0
    pass_metric: str = "accuracy"
    comparisons: list[Comparison] = field(default_factory=list)
    landmarks_missed: list[str] = field(default_factory=list)
    unit_test: UnitTestOutcome | None = None


RAN = [Step(thought="", action=Action.EXECUTE, content="x", output="done\n", cell_status="ok")]


@pytest.mark.parametrize(
    ("episode", "says"),
    [
        (
            _Episode(pass_metric="landmarks", metric_value=0.5, landmarks_missed=["epoch 1"]),
            "the expert solution missed landmarks: landmarks 0.5 (not hit: 'epoch 1')",
        ),
        (
            _Episode(pass_metric="script-executed"),
            "the expert solution did not run the task's script: script-executed 0 (the "
            "entrypoint did not run for 10 s without an exception)",
        ),
        (
            _Episode(
                pass_metric="unit-tests", unit_test=UnitTestOutcome(False, why="1 failed of 1")
            ),
            "the golden function did not pass the task's unit test: 1 failed of 1",
        ),
        (
            _Episode(comparisons=[Comparison("acc", 0.5, 0.52, 0.0), Comparison("n", 3, 3, 1.0)]),
            "the expert solution did not reproduce the gold answer: accuracy 0 "
            "(acc: expected 0.5, submitted 0.52)",
        ),
    ],
)
def test_every_gold_miss_is_an_environment_error_that_says_which(
    episode: _Episode, says: str
) -> None:
    fault = world_fault("gold", RAN, episode)
    assert type(fault) is EnvironmentFault and str(fault).startswith(says + ";"), fault
    assert "the environment differs from the one the answer was recorded in" in str(fault)


def test_what_a_gold_miss_is_not() -> None:
    assert world_fault("gold", RAN, _Episode(passed=True)) is None
    # a limit of the run ended it: its own status says so, as for any agent
    assert world_fault("gold", RAN, _Episode(exit_status=ExitStatus.COMPUTE_LIMIT)) is None
    # an agent that is not gold: its wrong answer is its failure
    assert world_fault("react", RAN, _Episode()) is None
