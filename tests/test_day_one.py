"""Issue 44, item 6: the smaller things a new user meets on day one, each with its test."""

from __future__ import annotations

import pytest

from tests.support.openai_server import FakeOpenAIServer

TASK = """\
id: adder
query: 'Report x as a json structured as follows: {"x": 0}.'
answer: {x: 1}
solution:
  - execute: |
      print('{"x": 1}')
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    path = pytester.path / "tasks" / "expert" / "adder.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(TASK)
    return pytester


def test_the_projects_own_pip_cache_setting_causes_no_warning(
    project: pytest.Pytester, openai_server: FakeOpenAIServer
) -> None:
    # this repository's pyproject.toml sets super_pip_cache: every non-gold run warned about it
    project.makeini("[pytest]\nsuper_tasks = tasks\nsuper_pip_cache = some-volume\n")
    args = (
        "tasks",
        "--super-agent=react-super",
        "--super-model=gpt-4o",
        f"--super-base-url={openai_server.base_url}",
        "--collect-only",
        "-q",
    )
    quiet = project.runpytest_subprocess(*args)
    assert quiet.ret == 0, quiet.stdout.str()
    assert "not mounted" not in quiet.stdout.str() + quiet.stderr.str()
    asked = project.runpytest_subprocess(*args, "--super-pip-cache=some-volume")
    assert "pip cache volume 'some-volume' not mounted" in asked.stdout.str() + asked.stderr.str()


def run_react(project: pytest.Pytester, server: FakeOpenAIServer, *extra: str):
    project.makeini("[pytest]\nsuper_tasks = tasks\n")
    return project.runpytest_subprocess(
        "tasks",
        "--super-agent=react-super",
        f"--super-base-url={server.base_url}",
        "--super-backend=local",
        "-n",
        "2",
        *extra,
    )


SUBMIT = 'Thought: done.\nAction: submit\n<content>\n{"x": 1}\n'


def test_a_model_of_no_known_price_is_said_once(
    project: pytest.Pytester, openai_server: FakeOpenAIServer
) -> None:
    second = project.path / "tasks" / "expert" / "second.yaml"
    second.write_text(TASK.replace("id: adder", "id: second"))
    openai_server.script([SUBMIT, SUBMIT])
    result = run_react(project, openai_server, "--super-model=my-local-llama")
    result.assert_outcomes(passed=2)
    out = result.stdout.str() + result.stderr.str()
    assert out.count("no price is known for model 'my-local-llama'") == 1, out
    openai_server.script([SUBMIT, SUBMIT])
    priced = run_react(project, openai_server, "--super-model=my-local-llama", "--super-price=0,0")
    priced.assert_outcomes(passed=2)
    assert "no price is known" not in priced.stdout.str() + priced.stderr.str()
