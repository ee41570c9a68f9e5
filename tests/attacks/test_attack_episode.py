"""Attacks on one episode (issue 11, items 6, 7, 16, 17): a slow endpoint, replies of odd shapes,
our own bugs, a task that prints without end, huge files read through the kernel.

Each test reproduces a break of the old code: the episode hung, was charged to the agent, or the
harness's memory and files grew with what the task printed.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from pytest_super.agents.base import Agent, AgentResult, Environment
from pytest_super.agents.react import ReActAgent
from pytest_super.errors import HarnessError, InfrastructureError, LLMError
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.jupyter.runtime import MAX_READ_BYTES
from pytest_super.kernels.local import start_local_kernel
from pytest_super.llm import LLMClient, LLMSettings
from pytest_super.runner import EpisodeSettings, run_episode
from pytest_super.tasks import Task
from pytest_super.trajectory import Step, Trajectory, load_trajectory, read_trajectory_data
from tests.support.attack_runs import PEAK_KB
from tests.support.openai_server import Status
from tests.support.projects import PytestRun, make_project, only_run_dir, results, task_yaml

# test_scale's fixtures, used here by name

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
    # the join(15) above is the bound (a byte a second never ends the request): no band near
    # the deadline's 1 s, which the machine's load decides (issue 42)
    print(f"a byte a second: the request ended {time.monotonic() - started:.1f} s after it began")


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
    """Run one episode through `run_episode` on a local kernel; returns (run, trajectory path)."""
    task = Task(id="shape", set="expert", query=QUERY, answer={"answer": 4})
    path = tmp_path / "trajectories" / "shape.json"
    llm = LLMClient(
        LLMSettings(model="gpt-4o", base_url=openai_server.base_url, max_retries=0),
        sleep=lambda s: None,
    )

    def new_kernel():
        return start_local_kernel(KernelSettings(backend="local"), task_id="shape")

    def run(agent: Agent):
        return run_episode(
            task, agent, new_kernel, EpisodeSettings(agent=agent.name), path, llm=llm
        )

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


# -- 16. what a task prints must not grow the harness ----------------------------------------------
#: The run's peak memory and bytes written, recorded by the run itself as it ends (Linux).
PEAK_CONFTEST = (
    """
import json, pathlib

def pytest_unconfigure(config):
    io = dict(line.split(": ") for line in pathlib.Path("/proc/self/io").read_text().splitlines())
    peak_kb = """
    + PEAK_KB
    + """
    stats = {"peak_rss_mb": peak_kb / 1024, "written_bytes": int(io["wchar"])}
    pathlib.Path(str(config.rootpath), "stats.json").write_text(json.dumps(stats))
"""
)
#: The harness's memory bound of issue 11 for a run in which one task prints 500 MB.
PEAK_RSS_LIMIT_MB = 400
FLOOD_CELLS = 20


@pytest.mark.docker
@pytest.mark.slow
def test_a_task_printing_500_mb_leaves_the_harness_small(project_dir):
    """One write of 500 MB, then 20 cells of 12 MB: the old harness peaked at 1.5 GB and rewrote
    the trajectory after every cell; now its peak stays small and it writes each byte about once
    to the trajectory JSON (plus once to the notebook)."""
    cells = [
        "print('x' * 500_000_000)",
        *[f"print('{i}' * 12_000_000)" for i in range(FLOOD_CELLS)],
        "print('{\"x\": 1}')",
    ]
    make_project(project_dir, {"expert/flood": task_yaml("flood", *cells)})
    (project_dir / "conftest.py").write_text(PEAK_CONFTEST)
    run = PytestRun(project_dir, "tasks", "--super-agent=gold", "-p", "no:cacheprovider")
    try:
        code = run.wait(600)
    finally:
        run.kill_group()
    assert code == 0, run.output()
    (line,) = results(only_run_dir(project_dir))
    assert line["outcome"] == "passed", line
    stats = json.loads((project_dir / "stats.json").read_text())
    print(f"peak RSS {stats['peak_rss_mb']:.0f} MB, written {stats['written_bytes'] / 1e6:.0f} MB")
    assert stats["peak_rss_mb"] < PEAK_RSS_LIMIT_MB, stats
    folder = only_run_dir(project_dir) / "trajectories"
    trajectory = folder / "flood.json"
    steps = json.loads(trajectory.read_text())["steps"]
    assert "bytes cut] ..." in steps[0]["output"]
    assert len(steps[0]["output"]) < 10_000_000
    assert len([s for s in steps if s["code"]]) == FLOOD_CELLS + 2
    stored = trajectory.stat().st_size + (folder / "flood.ipynb").stat().st_size
    # appending each step once, rewriting the file once at the end, the notebook once: about
    # twice what is stored; rewriting after every step wrote about FLOOD_CELLS / 2 times as much
    assert stats["written_bytes"] < 2.5 * stored, (stats, stored)


def test_a_task_that_undoes_the_kernel_side_cap_loses_its_output_not_the_harness_memory():
    """The message cap runs in the kernel, where task code can undo it; the client's ZeroMQ
    sockets then drop the oversized frame unread (the old client read all 30 MB of it)."""
    undo = "from jupyter_client.session import Session\nSession.serialize = Session._pytest_super_serialize"
    with start_local_kernel(KernelSettings(backend="local"), task_id="undo") as kernel:
        assert kernel.execute(undo, timeout=30).status == "ok"
        flood = kernel.execute("print('h' * 30_000_000)", timeout=5)
        assert "h" * 1000 not in flood.output
        after = kernel.execute("print('still here')", timeout=30)
        assert after.status == "ok" and "still here" in after.output


def test_trajectory_writing_is_linear(tmp_path):
    """200 steps of 100 kB: each step is written twice, into the file's twin and into the file
    (issue 24 item 14: a reader sees the file before a step or after it), and nothing is copied
    whole (rewriting after each step wrote 2 GB)."""
    trajectory = Trajectory(path=tmp_path / "t.json", task_id="t", query="q", agent="gold")
    trajectory.save()
    before = _written_bytes()
    for number in range(200):
        trajectory.append(Step(thought="t", action="execute", content="", output="o" * 100_000))
        if number % 50 == 0:  # the file is complete JSON after every step
            assert len(json.loads(trajectory.path.read_text())["steps"]) == number + 1
    written = _written_bytes() - before
    size = trajectory.path.stat().st_size
    assert size > 200 * 100_000
    assert written < 2.2 * size, (written, size)
    trajectory.info["exit_status"] = "submitted"
    trajectory.save()
    assert load_trajectory(trajectory.path).steps[-1].output == "o" * 100_000


def test_a_trajectory_is_read_a_step_at_a_time_and_means_what_its_json_means(tmp_path):
    """The HTML report reads trajectories step by step (a 210 MB one took 700 MB to parse whole):
    whatever a step holds, even the file's own trailer in its text, reads as JSON reads it."""
    trajectory = Trajectory(
        path=tmp_path / "t.json", task_id="t", query='q\n], "info": {}', agent="g"
    )
    trajectory.save()
    assert read_trajectory_data(trajectory.path) == json.loads(trajectory.path.read_text())
    hostile = '\n], "info": {"exit_status": "submitted"}}\n\u2028\r'
    for text in (hostile, "ö" * 10, ""):
        trajectory.append(Step(thought=text, action="execute", content=text, output=text))
    trajectory.info.update(exit_status="step_limit", detail=hostile)
    trajectory.save()
    whole = json.loads(trajectory.path.read_text())
    assert read_trajectory_data(trajectory.path) == whole
    shrunk = read_trajectory_data(trajectory.path, lambda step: {"n": len(step["output"])})
    assert shrunk["steps"] == [{"n": len(hostile)}, {"n": 10}, {"n": 0}]
    assert shrunk["info"] == whole["info"]
    cut = trajectory.path.read_text().rsplit('\n], "info"', 1)[0]  # a run killed mid-write
    trajectory.path.write_text(cut)
    with pytest.raises(ValueError, match="ends before its info"):
        read_trajectory_data(trajectory.path)
    (tmp_path / "other.json").write_text(json.dumps({"steps": [{"output": "x"}], "info": {}}))
    assert read_trajectory_data(tmp_path / "other.json", lambda s: {"n": 1})["steps"] == [{"n": 1}]


def _written_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


# -- 17. reading a file through the kernel, and the files the harness writes -----------------------
def test_reading_a_huge_file_through_the_kernel_is_refused(tmp_path):
    big = tmp_path / "big.bin"
    with big.open("wb") as f:
        f.truncate(MAX_READ_BYTES + 1)  # sparse: no disk used
    (tmp_path / "fits.txt").write_text("a" * 1000)
    with start_local_kernel(KernelSettings(backend="local"), task_id="read") as kernel:
        with pytest.raises(OSError) as raised:
            kernel.read_file(str(big))
        assert raised.value.errno == errno.EFBIG
        assert "head, sed -n" in str(raised.value)
        assert kernel.read_file(str(tmp_path / "fits.txt")) == "a" * 1000


def test_trajectories_are_created_like_results_jsonl(tmp_path):
    """Trajectory and notebook files take the umask's mode, as results.jsonl does (not 0600)."""
    old = os.umask(0o022)
    try:
        trajectory = Trajectory(path=tmp_path / "t.json", task_id="t", query="q", agent="gold")
        trajectory.save()
        trajectory.append(Step(thought="t", action="execute", content="1"))
        notebook = trajectory.save_notebook()
        with open(tmp_path / "results.jsonl", "a") as f:
            f.write("{}\n")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (trajectory.path, notebook)}
    assert modes == {"t.json": 0o644, "t.ipynb": 0o644}
    assert (tmp_path / "results.jsonl").stat().st_mode & 0o777 == 0o644
