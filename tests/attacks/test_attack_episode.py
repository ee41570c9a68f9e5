"""Attacks on one episode (issue 11, items 6, 7, 16, 17): a slow endpoint, replies of odd shapes,
our own bugs, a task that prints without end, huge files read through the kernel.

Each test reproduces a break of the old code: the episode hung, was charged to the agent, or the
harness's memory and files grew with what the task printed.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from openai_server import Status

from pytest_super.agents.base import Agent, AgentResult, Environment
from pytest_super.agents.llm import LLMClient, LLMSettings
from pytest_super.agents.react import ReActAgent
from pytest_super.errors import HarnessError, InfrastructureError, LLMError
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.local import start_local_kernel
from pytest_super.runner import RunSettings, run_task
from pytest_super.tasks import Task
from pytest_super.trajectory import load_trajectory

MESSAGES = [{"role": "user", "content": "2+2?"}]
QUERY = 'Compute 2+2. Report it as a json structured as follows: {"answer": 0}'
SUBMIT = 'Thought: done\nAction: submit\n<content>\n{"answer": 4}\n</content>\n'


def completion(message: object, usage: object = None) -> Status:
    """A 200 answer whose body has `message` as choices[0].message (any shape)."""
    body: dict[str, object] = {"choices": [{"index": 0, "message": message}]}
    if usage is not None:
        body["usage"] = usage
    return Status(200, body=body)


# -- 6. a slow endpoint -----------------------------------------------------------------------------
class DripServer:
    """Answers every request with headers promising 1 MB, then sends one byte every 0.1 s."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
            try:
                conn.sendall(head)
                while not self._stop.wait(0.1):
                    conn.sendall(b" ")
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


def test_a_slow_endpoint_hits_the_total_deadline():
    server = DripServer()
    settings = LLMSettings(
        model="gpt-4o", base_url=f"http://127.0.0.1:{server.port}/v1", max_retries=0, timeout_s=1.0
    )
    outcome: list[BaseException | str] = []

    def ask() -> None:
        try:
            with LLMClient(settings, sleep=lambda s: None) as llm:
                llm.complete(MESSAGES)
            outcome.append("answered")
        except BaseException as exc:  # the thread reports whatever happened
            outcome.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=ask, daemon=True)
    worker.start()
    worker.join(timeout=15)
    server.close()
    assert not worker.is_alive(), "a byte a second kept the request alive past its deadline"
    (result,) = outcome
    assert isinstance(result, LLMError), result
    assert "timed out" in str(result) and "total deadline of 1 s" in str(result)
    assert time.monotonic() - started < 5


# -- 7. replies of valid but unexpected shapes ------------------------------------------------------
def test_content_as_a_list_of_parts_is_read(openai_server):
    parts = [
        {"type": "text", "text": "Thought: four\n"},
        {"type": "image_url", "image_url": {"url": "data:,"}},
        {"type": "text", "text": "Action: submit"},
    ]
    openai_server.script([completion({"role": "assistant", "content": parts})])
    settings = LLMSettings(model="gpt-4o", base_url=openai_server.base_url)
    with LLMClient(settings) as llm:
        reply = llm.complete(MESSAGES)
    assert reply.text == "Thought: four\nAction: submit"


@pytest.mark.parametrize(
    "message",
    ["Thought: a bare string", {"content": 42}, {"content": [1, 2]}],
    ids=["message-string", "content-number", "content-list-of-numbers"],
)
def test_an_unreadable_reply_is_an_endpoint_error(openai_server, message):
    openai_server.script([completion(message)])
    settings = LLMSettings(model="gpt-4o", base_url=openai_server.base_url, max_retries=0)
    with LLMClient(settings) as llm, pytest.raises(LLMError, match="chat-completions protocol"):
        llm.complete(MESSAGES)


@pytest.fixture
def episode(tmp_path, openai_server):
    """Run one episode through `run_task` on a local kernel; returns (run, trajectory path)."""
    task = Task(id="shape", set="expert", query=QUERY, answer={"answer": 4})
    path = tmp_path / "trajectories" / "shape.json"
    llm = LLMClient(
        LLMSettings(model="gpt-4o", base_url=openai_server.base_url, max_retries=0),
        sleep=lambda s: None,
    )

    def new_kernel():
        return start_local_kernel(KernelSettings(backend="local"), task_id="shape")

    def run(agent: Agent):
        return run_task(task, agent, new_kernel, RunSettings(agent=agent.name), path, llm=llm)

    yield run, path
    llm.close()


def test_usage_of_strings_is_not_charged_to_the_agent(episode, openai_server):
    run, path = episode
    usage = {"prompt_tokens": "lots", "completion_tokens": "few"}
    openai_server.script([completion({"role": "assistant", "content": SUBMIT}, usage)])
    with pytest.raises(InfrastructureError):
        run(ReActAgent())
    assert load_trajectory(path).info["exit_status"] in ("llm_error", "harness_error")


def test_a_reply_with_content_parts_runs_the_episode(episode, openai_server):
    run, _ = episode
    openai_server.script([completion({"content": [{"type": "text", "text": SUBMIT}]})])
    result = run(ReActAgent())
    assert result.passed and result.submission == {"answer": 4}


class BrokenAgent(Agent):
    """Stands for a bug in our own agent code: it raises what no agent means to raise."""

    name = "broken"

    def run(self, env: Environment) -> AgentResult:
        env.execute("x = 1")
        return {}["no such key"]


def test_our_own_bug_is_a_harness_error_not_the_agents_failure(episode):
    run, path = episode
    with pytest.raises(HarnessError, match=r"KeyError.*bug of the harness"):
        run(BrokenAgent())
    info = load_trajectory(path).info
    assert info["exit_status"] == "harness_error"
    assert "KeyError" in info["detail"]
    assert Path(path).with_suffix(".json").exists()
