"""`pytest-super serve`, the stand-in model (issue 44, item 5; pytest_super/serve.py).

The command itself (a process of its own, as a user starts it) drives a run of make demo's size
(19 tasks) of the react-super agent, the local kernel backend; its script and recorded-run
policies are checked through our own LLM client; replay-run and serve take a shipped `.tar.xz`.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super.llm import LLMClient, LLMSettings
from pytest_super.replay.imported import read_episodes
from pytest_super.replay.script import episode_script
from pytest_super.serve import ServeError, serve, unpacked_run
from tests.support.projects import PASS, make_project, task_yaml

SHIPPED = Path(__file__).parent / "data" / "super-reference" / "runs"
REACT_EXPERT = SHIPPED / "gpt-4o-2024-08-06_react-super_expert.tar.xz"
DEMO_TASKS = 19  # make demo's tasks/: 4 expert, 12 masked, 3 auto


def ask(url: str, text: str, history: list[str] | None = None) -> str:
    messages = [{"role": "user", "content": text}]
    for reply in history or []:
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "go"}]
    with LLMClient(LLMSettings(model="gpt-4o", base_url=url, max_retries=0)) as client:
        return client.complete(messages).text


def test_serve_drives_a_demo_sized_run_of_an_llm_agent(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "project",
        {f"expert/t{n:02d}": task_yaml(f"t{n:02d}", PASS) for n in range(DEMO_TASKS)},
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "pytest_super.cli", "serve", "--answer", '{"x": 1}'],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith("base URL: http://127.0.0.1:"), first
        url = first.split(": ", 1)[1].strip()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "tasks",
                "--super-agent=react-super",
                "--super-model=gpt-4o",
                f"--super-base-url={url}",
                "--super-backend=local",
                "-q",
            ],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{DEMO_TASKS} passed" in run.stdout, run.stdout
    assert code == 0  # SIGTERM ends it cleanly


def test_the_script_policy_serves_its_replies_in_order(tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["first", "second"]))
    args = argparse.Namespace(
        run=None, script=script, agent="react-super", answer="{}", url_file=None
    )
    endpoint = serve(args, tmp_path, ready=lambda url: None)
    try:
        assert [ask(endpoint.base_url, "q"), ask(endpoint.base_url, "q")] == ["first", "second"]
        with pytest.raises(Exception, match="no reply for this request"):
            ask(endpoint.base_url, "q")
    finally:
        endpoint.stop()


def test_the_run_policy_serves_a_shipped_runs_recorded_replies(tmp_path: Path) -> None:
    url_file = tmp_path / "url"
    args = argparse.Namespace(
        run=REACT_EXPERT, script=None, agent="react-super", answer="{}", url_file=url_file
    )
    (tmp_path / "work").mkdir()
    endpoint = serve(args, tmp_path / "work", ready=lambda url: None)
    try:
        assert url_file.read_text().strip() == endpoint.base_url
        (run_dir,) = [p for p in (tmp_path / "work").iterdir() if p.is_dir()]
        episode = next(
            e for e in read_episodes(run_dir).episodes if len(episode_script(e).replies) >= 2
        )
        replies = [r.text for r in episode_script(episode).replies]
        query = f"Query: {episode.query}\nGo."
        assert ask(endpoint.base_url, query) == replies[0]
        assert ask(endpoint.base_url, query, history=[replies[0]]) == replies[1]
    finally:
        endpoint.stop()


def test_a_shipped_run_is_unpacked_and_anything_else_named(tmp_path: Path) -> None:
    run_dir = unpacked_run(REACT_EXPERT, tmp_path)
    assert run_dir.is_dir() and read_episodes(run_dir).episodes
    with pytest.raises(ServeError, match="no such file; give a run folder or a shipped run"):
        unpacked_run(tmp_path / "nothing.tar.xz", tmp_path)
    assert unpacked_run(tmp_path / "a-folder", tmp_path) == tmp_path / "a-folder"
