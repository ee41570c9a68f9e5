"""Attacks on the console, the edit tool and submissions (issue 29, causes 6, 9 and 10).

Real runs: pytest in a subprocess with the Docker backend and a scripted chat-completions server on
127.0.0.1, or the edit API against a real Docker kernel. Each test failed before its fix.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

SECRET = "sk-test-console-edit-submit-9d8c"

TASK = """\
id: answer_task
query: 'Report the score as a json structured as follows: {"score": 0.0}.'
answer: {score: 0.5}
"""


def swe_reply(command: str) -> str:
    return f"DISCUSSION\nNext.\n```\n{command}\n```\n"


def react_reply(action: str, content: str) -> str:
    return f"Thought: next.\nAction: {action}\n<content>\n{content}\n"


@pytest.fixture
def project(pytester: pytest.Pytester, image: str, monkeypatch) -> pytest.Pytester:
    monkeypatch.setenv("SUPER_API_KEY", SECRET)
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    path = pytester.path / "tasks/expert/answer.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(TASK)
    return pytester


def run(project: pytest.Pytester, server, agent: str, *extra: str) -> pytest.RunResult:
    return project.runpytest_subprocess(
        "tasks",
        f"--super-agent={agent}",
        "--super-model=gpt-4o",
        f"--super-base-url={server.base_url}",
        f"--junitxml={project.path / 'junit.xml'}",
        "--super-mem=1g",
        "-p",
        "no:cacheprovider",
        *extra,
    )


def junit_properties(project: pytest.Pytester) -> dict[str, str]:
    (case,) = ET.parse(project.path / "junit.xml").getroot().iter("testcase")
    return {p.get("name", ""): p.get("value", "") for p in case.iter("property")}


def trajectory_info(props: dict[str, str]) -> dict:
    path = props["super.trajectory"].removesuffix(".ipynb") + ".json"
    return json.loads(open(path, encoding="utf-8").read())["info"]


# --- cause 10: submissions the scorer could not take ----------------------------------------------

DEEP = "[" * 5000 + "]" * 5000  # nested 5,000 deep: json.loads raised RecursionError
HUGE = "9" * 401  # a 401-digit integer: int - float raised OverflowError


@pytest.mark.docker
@pytest.mark.parametrize(
    "answer",
    [DEEP, '{"score": ' + DEEP + "}", '{"score": ' + HUGE + "}", '{"score": NaN}'],
    ids=["deep", "deep-under-a-key", "huge-int", "nan"],
)
def test_a_swe_agent_submission_the_scorer_cannot_match_is_scored_zero(
    project, openai_server, answer
):
    openai_server.script([swe_reply(f"submit {answer}")])
    result = run(project, openai_server, "swe")
    result.assert_outcomes(failed=1)  # the agent's answer, scored: a failure, not an error
    props = junit_properties(project)
    assert props["super.exit_status"] == "submitted"
    assert float(props["super.accuracy"]) == 0.0
    assert "harness_error" not in result.stdout.str()
    assert trajectory_info(props)["exit_status"] == "submitted"


@pytest.mark.docker
def test_a_react_agent_told_its_deep_answer_is_refused_then_scored(project, openai_server):
    """ReAct-SUPER checks a submission's JSON before it ends the episode: a deep one is a format
    error the model is told about (it was a RecursionError: harness_error); its next answer, a
    401-digit integer against a float, scores 0."""
    openai_server.script(
        [react_reply("submit", '{"score": ' + DEEP + "}"), react_reply("submit", HUGE)]
    )
    result = run(project, openai_server, "react-super")
    result.assert_outcomes(failed=1)
    assert "levels deep" in openai_server.requests[1].prompt_text
    props = junit_properties(project)
    assert props["super.exit_status"] == "submitted" and float(props["super.accuracy"]) == 0.0

