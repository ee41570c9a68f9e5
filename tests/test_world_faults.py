"""The world's faults inside a task are named and never charged to the agent (issue 44, item 2;
pytest_super/netfaults.py).

A gold run (the local kernel backend: a real ipykernel, a real `git clone`) of a task whose
repository cannot be cloned (its host does not resolve: `.invalid` never does) is an
environment error with exit status `network_error` in pytest, JUnit, results.jsonl and the HTML
report, not a failure; a gold solution that prints a wrong answer without failing stays a failure.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from pytest_super.errors import ExitStatus
from pytest_super.netfaults import network_fault
from tests.support.projects import junit_outcomes, junit_properties

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


def test_a_gold_run_whose_repository_cannot_be_cloned_is_an_environment_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    for name, text in {"cloner": CLONE, "wrong": WRONG}.items():
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
    result.assert_outcomes(failed=1, errors=1)  # the wrong answer stays the agent's failure
    result.stdout.fnmatch_lines(["*NetworkFault*DNS*Could not resolve host*nonexistent.invalid*"])
    assert junit_outcomes(junit) == {"cloner": "error", "wrong": "failure"}
    assert junit_properties(junit)["cloner"]["super.exit_status"] == "network_error"
    (run_dir,) = (pytester.path / "out").iterdir()
    rows = {
        r["task_id"]: r
        for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    }
    assert rows["cloner"]["outcome"] == "error"
    assert rows["cloner"]["exit_status"] == ExitStatus.NETWORK_ERROR.value
    assert rows["wrong"]["outcome"] == "failed"
    index = (run_dir / "index.html").read_text()
    page = (run_dir / "tasks" / "cloner.html").read_text()
    assert "network_error" in page and "cloner" in index
    assert "Could not resolve host" in page and "cloner.ipynb" in page  # the error, the notebook
    assert rows["cloner"]["detail"].startswith("NetworkFault: the network failed")
    trajectory = json.loads((run_dir / "trajectories" / "cloner.json").read_text())
    assert trajectory["info"]["exit_status"] == "network_error"
    assert "Could not resolve host" in trajectory["info"]["detail"]


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
