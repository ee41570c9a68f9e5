"""Fidelity to SUPER's reference, through the whole plugin: real containers, a real scripted
chat-completions server on 127.0.0.1. One test per changed behaviour: a failing prefix is recorded
and the task scored; the reply that crosses the token budget is acted on; the compute limit lets
the running cell finish, then ends the episode; malformed replies stay in the history; the
SWE-agent's flake8 lint rejects an edit (flake8 never enters the container); its `submit` takes
text that is not JSON, scored 0."""

from __future__ import annotations

import json
import textwrap

import pytest

from pytest_super.kernels.docker.image import build_image
from tests.support.projects import junit_properties as read_junit_properties

pytestmark = pytest.mark.docker

MASKED = """\
id: counter_configuration
query: |
  I have already executed some of the required steps. Run count.py and report the count as a
  json structured as follows: {"count": 0}.
answer: {count: 12}
landmarks: ['count=12']
pre_executed:
  - execute: This line is prose, not Python
  - edit:
      file: missing.py
      before: "a = 1\\n"
      after: "a = 2\\n"
  - execute: |
      %%writefile count.py
      print(f"count={3 * 4}")
"""

EXPERT = """\
id: lint_demo
query: |
  Fix train.py and report the accuracy as a json structured as follows: {"acc": 0}.
answer: {acc: 0.5}
landmarks: ['acc=0.5']
"""

RUN = "Thought: Run the script.\nAction: execute\n<content>\n!python count.py\n"
SUBMIT = 'Thought: The count is 12.\nAction: submit\n<content>\n{"count": 12}\n'


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture
def project(pytester: pytest.Pytester, image: str, monkeypatch) -> pytest.Pytester:
    monkeypatch.setenv("SUPER_API_KEY", "sk-test-fidelity")
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    for path, text in (("tasks/masked/counter.yaml", MASKED), ("tasks/expert/lint.yaml", EXPERT)):
        (pytester.path / path).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / path).write_text(textwrap.dedent(text))
    return pytester


def run(project: pytest.Pytester, server, task: str, *extra: str):
    return project.runpytest_subprocess(
        f"tasks/{task}",
        "--super-agent=react-super",
        "--super-model=gpt-4o",
        f"--super-base-url={server.base_url}",
        f"--junitxml={project.path / 'junit.xml'}",
        "--super-mem=1g",
        "-p",
        "no:cacheprovider",
        *extra,
    )


def properties(project: pytest.Pytester) -> dict[str, str]:
    (props,) = read_junit_properties(project.path / "junit.xml").values()
    return props


def trajectory_steps(project: pytest.Pytester) -> list[dict]:
    (path,) = (project.path / "reports").glob("*/trajectories/*.json")
    return json.loads(path.read_text())["steps"]


def test_failing_prefix_is_recorded_and_the_task_scored(project, openai_server):
    openai_server.script([RUN, SUBMIT])
    result = run(project, openai_server, "masked")
    result.assert_outcomes(passed=1)
    props = properties(project)
    assert (props["super.exit_status"], props["super.accuracy"]) == ("submitted", "1.0")
    prefix = [s for s in trajectory_steps(project) if s["pre_executed"]]
    assert [s["cell_status"] for s in prefix] == ["error", "error", "ok"]
    first_prompt = openai_server.requests[0].prompt_text
    assert "SyntaxError" in first_prompt and "Thought: [pre-executed by user]" in first_prompt


def test_the_reply_that_crosses_the_token_budget_is_acted_on(project, openai_server):
    openai_server.script([RUN, SUBMIT])
    result = run(project, openai_server, "masked", "--super-token-budget=10")
    result.assert_outcomes(failed=1)
    props = properties(project)
    assert props["super.exit_status"] == "budget_exceeded"
    assert props["super.landmarks"] == "1.0"  # the crossing reply ran count.py
    assert props["super.submitted"] == "false" and len(openai_server.requests) == 1
    assert trajectory_steps(project)[-1]["action"] == "budget_exceeded"


def test_compute_limit_lets_the_cell_finish_then_ends_without_a_submission(project, openai_server):
    slow = "Thought: Run it slowly.\nAction: execute\n<content>\nimport time; time.sleep(3)\n!python count.py\n"
    openai_server.script([slow, SUBMIT])
    result = run(project, openai_server, "masked", "--super-compute-limit=1")
    result.assert_outcomes(failed=1)
    props = properties(project)
    assert props["super.exit_status"] == "compute_limit" and props["super.submitted"] == "false"
    assert props["super.landmarks"] == "1.0"  # the cell ran to its end, past the limit
    assert len(openai_server.requests) == 1
    steps = trajectory_steps(project)
    assert steps[-2]["cell_status"] == "ok" and steps[-1]["action"] == "compute_limit"


def test_format_errors_stay_in_the_history_and_do_not_end_the_episode(project, openai_server):
    openai_server.script(["no format", "still none", "nope", "nothing", RUN, SUBMIT])
    result = run(project, openai_server, "masked")
    result.assert_outcomes(passed=1)
    actions = [s["action"] for s in trajectory_steps(project) if not s["pre_executed"]]
    assert actions == ["format_error"] * 4 + ["execute", "submit"]
    last_prompt = openai_server.requests[5].prompt_text
    assert last_prompt.count("Thought: \nAction: \n<content>\n\n</content>\nObservation:") == 4
    assert int(properties(project)["super.steps"]) == 2  # format errors are not actions


TRAIN = "import json\\nacc = 0.5\\nprint(f'acc={acc}')\\n"


def swe(command: str) -> str:
    return f"DISCUSSION\nNext.\n```\n{command}\n```\n"


def test_swe_agent_flake8_rejects_an_edit_and_stays_out_of_the_container(project, openai_server):
    openai_server.script(
        [
            swe(f'!printf "{TRAIN}" > train.py'),
            swe("open train.py"),
            swe("edit 2:2\nacc = undefined_accuracy\nend_of_edit"),  # F821: rejected
            swe("!python train.py && pip list 2>/dev/null | grep -ci flake8"),
            swe('submit {"acc": 0.5}'),
        ]
    )
    result = run(project, openai_server, "expert", "--super-agent=swe")
    result.assert_outcomes(passed=1)
    steps = trajectory_steps(project)
    assert "NOT applied" in steps[2]["observation"]
    assert "- F821 undefined name 'undefined_accuracy'" in steps[2]["observation"]
    assert steps[3]["output"].split() == ["acc=0.5", "0"]  # file unchanged; no flake8 in pip


def test_swe_agent_submit_takes_text_that_is_not_json_and_scores_0(project, openai_server):
    openai_server.script([swe("submit {acc: 0.5}")])
    result = run(project, openai_server, "expert", "--super-agent=swe")
    result.assert_outcomes(failed=1)
    props = properties(project)
    assert props["super.exit_status"] == "submitted" and props["super.submitted"] == "true"
    assert props["super.accuracy"] == "0.0"
    result.stdout.fnmatch_lines(["*not valid JSON*scores 0*"])
