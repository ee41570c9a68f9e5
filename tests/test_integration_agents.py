"""LLM agents through the whole plugin: a real fake endpoint on 127.0.0.1, real containers.

The scripted ReAct-SUPER episode of a masked task replays its prefix cells, makes an edit with a
whitespace mistake, fixes it after the hint, runs the script and submits; it must pass, its
trajectory must open as a valid notebook, and the API key must appear in nothing the run wrote.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker.engine import docker_client
from pytest_super.kernels.docker.image import build_image
from tests.support.openai_server import Status
from tests.support.projects import junit_properties as read_junit_properties

pytestmark = pytest.mark.docker

SECRET = "sk-test-do-not-leak-4f1e2d3c"

MASKED = """\
id: counter_configuration
query: |
  I have already executed some of the required steps. Now, set the device to cpu in settings.ini,
  run count.py and report the count as a json structured as follows: {"count": 0}.
answer: {count: 12}
landmarks: ['counting on cpu', 'count=12']
pre_executed:
  - execute: |
      %%writefile settings.ini
      device = cuda
      repeat = 4
  - execute: |
      %%writefile count.py
      conf = dict(line.split(" = ") for line in open("settings.ini").read().splitlines())
      assert conf["device"] == "cpu", "no GPU here"
      print(f"counting on {conf['device']}")
      print(f"count={3 * int(conf['repeat'])}")
"""

EDIT_WITH_WHITESPACE_MISTAKE = """Thought: The device must be cpu.
Action: edit
<content>
settings.ini
<<<BEFORE_EDIT>>>
    device = cuda
<<<AFTER_EDIT>>>
device = cpu
"""

EDIT_FIXED = """Thought: The hint shows the exact line; use it.
Action: edit
<content>
settings.ini
<<<BEFORE_EDIT>>>
device = cuda
<<<AFTER_EDIT>>>
device = cpu
"""

RUN = """Thought: Now run the script.
Action: execute
<content>
!python count.py
"""

SUBMIT = """Thought: The count is 12.
Action: submit
<content>
{"count": 12}
"""


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture
def project(pytester: pytest.Pytester, image: str, monkeypatch) -> pytest.Pytester:
    monkeypatch.setenv("SUPER_API_KEY", SECRET)
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    path = pytester.path / "tasks/masked/counter.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(MASKED))
    return pytester


def run(project: pytest.Pytester, server, *extra: str):
    return project.runpytest_subprocess(
        "tasks",
        "--super-agent=react-super",
        "--super-model=gpt-4o",
        f"--super-base-url={server.base_url}",
        f"--junitxml={project.path / 'junit.xml'}",
        "--super-mem=1g",
        "-p",
        "no:cacheprovider",
        *extra,
    )


def files_containing(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_text(errors="replace")]


def test_scripted_react_super_episode_passes_in_a_container(project, openai_server):
    openai_server.script([EDIT_WITH_WHITESPACE_MISTAKE, EDIT_FIXED, RUN, SUBMIT])
    result = run(project, openai_server)
    result.assert_outcomes(passed=1)
    # the model saw the whitespace hint after its first edit
    second_prompt = openai_server.requests[1].prompt_text
    assert "whitespace" in second_prompt.lower()
    # the prefix cells reached the model as pre-executed history
    assert "[pre-executed by user]" in openai_server.requests[0].prompt_text
    (props,) = read_junit_properties(project.path / "junit.xml").values()
    assert props["super.accuracy"] == "1.0" and props["super.landmarks"] == "1.0"
    assert props["super.agent"] == "react-super" and props["super.model"] == "gpt-4o"
    assert int(props["super.prompt_tokens"]) > 0 and int(props["super.steps"]) == 4
    nb = nbformat.read(props["super.trajectory"], as_version=4)
    nbformat.validate(nb)
    assert any(
        "count=12" in json.dumps(c.get("outputs", [])) for c in nb.cells if c.cell_type == "code"
    )
    # the key went only into the Authorization header
    assert all(SECRET not in json.dumps(r.body) for r in openai_server.requests)
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert files_containing(project.path, SECRET) == []


def test_wrong_submission_fails_with_the_diff(project, openai_server):
    openai_server.script([SUBMIT.replace("12", "11")])
    result = run(project, openai_server)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*MISS count: expected 12, submitted 11*", "*not hit: counting on cpu*"]
    )


def test_refused_key_is_an_error_not_a_failure(project, openai_server):
    openai_server.script(
        [Status(401, body={"error": {"message": f"Incorrect API key provided: {SECRET}"}})]
    )
    result = run(project, openai_server)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*LLMRefused*401*"])
    assert SECRET not in result.stdout.str()
    assert files_containing(project.path, SECRET) == []
    assert len(openai_server.requests) == 1


def test_key_never_reaches_the_container(project, openai_server):
    openai_server.script(
        [RUN.replace("!python count.py", "import os; print(sorted(os.environ))"), SUBMIT]
    )
    run(project, openai_server)
    observation = openai_server.requests[1].prompt_text
    assert (
        "PATH" in observation and "SUPER_API_KEY" not in observation and SECRET not in observation
    )
    client = docker_client(KernelSettings())
    (run_id,) = [p.name for p in (project.path / "reports").iterdir()]
    left = client.containers.list(all=True, filters={"label": f"pytest-super.run={run_id}"})
    assert [c.name for c in left] == []


def test_reflexion_retries_in_a_fresh_container_with_its_plan(project, openai_server):
    plan = (
        "Plan: the device line has no leading spaces; edit it exactly, run count.py, submit. [END]"
    )
    openai_server.script(["no format", "still no format", "nope", plan, EDIT_FIXED, RUN, SUBMIT])
    started = time.time()
    # three malformed replies use up attempt 1's three steps (they do not end it by themselves)
    result = run(
        project, openai_server, "--super-agent=reflexion", "--super-attempts=2", "--super-steps=3"
    )
    result.assert_outcomes(passed=1)
    # the second attempt's prompt carries the plan, and starts again from the prefix
    second_attempt = openai_server.requests[4].prompt_text
    assert "edit it exactly" in second_attempt and "[pre-executed by user]" in second_attempt
    (run_id,) = [p.name for p in (project.path / "reports").iterdir()]
    trajectory = json.loads(
        next((project.path / "reports" / run_id / "trajectories").glob("*.json")).read_text()
    )
    prefix_attempts = [s["attempt"] for s in trajectory["steps"] if s["pre_executed"]]
    assert prefix_attempts == [1, 1, 2, 2]  # the prefix was replayed in the new container
    client = docker_client(KernelSettings())
    events = client.events(
        since=int(started) - 1,
        until=int(time.time()) + 1,
        decode=True,
        filters={"type": "container", "event": "create"},
    )
    created = [e for e in events if e["Actor"]["Attributes"].get("pytest-super.run") == run_id]
    assert len(created) == 2  # one container per attempt
