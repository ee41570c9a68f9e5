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


def test_the_kept_kernel_hint_says_how_to_leave_its_console_and_that_way_keeps_it(
    tmp_path,
) -> None:
    import shlex
    import subprocess

    from pytest_super.errors import ExitStatus
    from pytest_super.kernels.jupyter.runtime import JupyterKernel
    from pytest_super.kernels.local import LocalBox
    from pytest_super.report import KEPT_CONSOLE_NOTE, format_failure
    from pytest_super.runner import TaskResult
    from pytest_super.tasks import load_yaml_task

    task_file = tmp_path / "expert" / "adder.yaml"
    task_file.parent.mkdir()
    task_file.write_text(TASK)
    kernel = JupyterKernel(LocalBox(task_id="keep-exit"))
    kernel.execute("x = 41", 30)
    hint = kernel.detach()
    stop = next(ln for ln in hint.splitlines() if "stop:" in ln).split("stop:", 1)[1]
    result = TaskResult(load_yaml_task(task_file), "gold", None, ExitStatus.SUBMITTED, kept=hint)
    assert KEPT_CONSOLE_NOTE in format_failure(result)
    assert "exit(keep_kernel=True)" in KEPT_CONSOLE_NOTE
    line = next(ln for ln in hint.splitlines() if "console --existing" in ln)
    command = [*shlex.split(line.split("connect:", 1)[1]), "--simple-prompt"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    try:
        for session in (
            "x += 1\nexit(keep_kernel=True)\n",
            "print(x + 1)\nexit(keep_kernel=True)\n",
        ):
            done = subprocess.run(
                command, input=session, capture_output=True, text=True, timeout=120, env=env
            )
            assert done.returncode == 0, done.stderr
        assert "43" in done.stdout, done.stdout  # the second session found the first one's x
    finally:
        subprocess.run(stop, shell=True, check=False)


def test_super_live_under_xdist_says_why_it_is_quiet(
    project: pytest.Pytester, openai_server: FakeOpenAIServer
) -> None:
    openai_server.script([SUBMIT])
    result = run_react(project, openai_server, "--super-model=gpt-4o", "--super-live")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pytest-super: --super-live shows no steps under xdist (-n 2)*"])
    openai_server.script([SUBMIT])
    alone = project.runpytest_subprocess(
        "tasks",
        "--super-agent=react-super",
        "--super-model=gpt-4o",
        f"--super-base-url={openai_server.base_url}",
        "--super-backend=local",
        "--super-live",
    )
    alone.assert_outcomes(passed=1)
    assert "shows no steps" not in alone.stdout.str()
    assert "[adder] submit: done." in alone.stdout.str()  # one process: the steps are shown
