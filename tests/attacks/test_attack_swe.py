"""Attacks on the SWE-agent's file viewer from task code and from what a task prints (issue 11,
item 14): a search result bigger than the output cap, helper snippets that ran outside the compute
limit, and late output of a cell swallowed by the next helper snippet. Real local kernels and a
real scripted chat-completions server on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_super.agents.base import (
    ComputeLimitReached,
    Environment,
    EpisodeLimits,
    ExitStatus,
)
from pytest_super.agents.swe import SWEAgent
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.local import start_local_kernel
from pytest_super.llm import LLMClient, LLMSettings
from pytest_super.tasks import Task
from pytest_super.trajectory import Step, Trajectory

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: a small output cap, so that a search result can outgrow it without writing megabytes
CAP_BYTES = 20_000


@pytest.fixture
def kernel() -> Iterator:
    settings = KernelSettings(backend="local", output_cap_bytes=CAP_BYTES)
    k = start_local_kernel(settings, task_id="swe-attack")
    try:
        yield k
    finally:
        k.close()


def make_env(kernel, tmp_path: Path, base_url: str, on_step=None, **limits) -> Environment:
    task = Task(id="swe-attack", set="expert", query="Report the accuracy.", answer={"acc": 1})
    trajectory = Trajectory(path=tmp_path / "t.json", task_id=task.id, query="q", agent="swe")
    llm = LLMClient(LLMSettings(model="gpt-4o", base_url=base_url, api_key="sk-x", max_retries=0))
    return Environment(task, kernel, trajectory, EpisodeLimits(**limits), llm=llm, on_step=on_step)


def reply(command: str) -> str:
    return f"DISCUSSION\nNext.\n```\n{command}\n```\n"


def test_search_results_beyond_the_output_cap_do_not_end_the_episode(
    kernel, openai_server, tmp_path
) -> None:
    kernel.write_file("one_long_line.txt", "needle " + "x" * (3 * CAP_BYTES) + "\n")
    kernel.write_file("many_lines.txt", ("needle " + "y" * 3000 + "\n") * 60)
    openai_server.script(
        [
            reply("search_file needle one_long_line.txt"),
            reply("search_file needle many_lines.txt"),
            reply('submit {"acc": 1}'),
        ]
    )
    env = make_env(kernel, tmp_path, openai_server.base_url)
    result = SWEAgent().run(env)  # before the fix: JSONDecodeError, an AGENT_ERROR
    assert result.exit_status is ExitStatus.SUBMITTED
    one, many, _ = env.trajectory.steps
    assert "Line 1:needle xxx" in one.observation and "[line cut]" in one.observation
    assert "cut by the kernel's output cap" in many.observation  # an error the model can act on


def test_viewer_snippets_count_against_the_compute_limit(kernel, openai_server, tmp_path) -> None:
    for n in range(200):
        kernel.write_file(f"tree/f{n}.txt", "needle\n")
    openai_server.script([reply("search_dir needle tree"), reply('submit {"acc": 1}')])
    env = make_env(kernel, tmp_path, openai_server.base_url)
    SWEAgent().run(env)
    assert env.compute_used_s > 0  # before the fix: 0.0, the snippets were never counted

    openai_server.script([reply("search_dir needle tree"), reply('submit {"acc": 1}')])
    env = make_env(kernel, tmp_path / "limited", openai_server.base_url, compute_s=0.0)
    with pytest.raises(ComputeLimitReached):  # the helper's time alone is over a zero limit
        SWEAgent().run(env)
    assert not any(s.action == "submit" for s in env.trajectory.steps)


def test_late_output_of_a_cell_is_not_swallowed_by_a_viewer_snippet(
    kernel, openai_server, tmp_path
) -> None:
    def slow_model(step: Step) -> None:  # the model takes its time: the late print lands now
        if step.action == "execute":
            time.sleep(2.5)

    kernel.write_file("notes.txt", "notes\n")
    openai_server.script(
        [
            reply(
                "import threading\n"
                "threading.Timer(1.5, lambda: print('LATE-MARK', flush=True)).start()"
            ),
            reply("open notes.txt"),
            reply('submit {"acc": 1}'),
        ]
    )
    env = make_env(kernel, tmp_path, openai_server.base_url, on_step=slow_model)
    SWEAgent().run(env)
    steps = env.trajectory.steps
    assert "LATE-MARK" not in steps[0].output  # printed after the cell and its grace
    # before the fix the snippet that read the current directory dropped it
    assert any("LATE-MARK" in s.output for s in steps[1:])
    assert "LATE-MARK" in openai_server.requests[2].prompt_text
