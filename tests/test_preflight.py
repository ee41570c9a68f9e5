"""The check before a run with an LLM agent: one small request to the endpoint; a refusal or no
answer stops the session at once with one message, before any task or kernel starts."""

from __future__ import annotations

import json
import socket
import time

import pytest

from pytest_super.llm import PREFLIGHT_PROMPT, LLMClient, LLMSettings
from tests.support.openai_server import FakeOpenAIServer, Status

SECRET = "sk-preflight-secret-0123456789"

TASK = """\
id: adder
query: 'Report the sum as {"sum": 0}.'
answer: {sum: 5}
solution:
  - execute: |
      print('{"sum": 5}')
"""

SUBMIT = """Thought: The sum is 5.
Action: submit
<content>
{"sum": 5}
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    monkeypatch.setenv("SUPER_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    (pytester.path / "tasks/expert").mkdir(parents=True)
    (pytester.path / "tasks/expert/adder.yaml").write_text(TASK)
    (pytester.path / "tasks/expert/other.yaml").write_text(TASK.replace("adder", "other"))
    return pytester


def run(project: pytest.Pytester, base_url: str, *extra: str):
    return project.runpytest_subprocess(
        "tasks",
        "--super-agent=react",
        "--super-model=gpt-4o",
        f"--super-base-url={base_url}",
        "--super-backend=local",
        "--super-report-dir=out",
        *extra,
    )


def nothing_ran(project: pytest.Pytester) -> bool:
    return not list(project.path.glob("out/*/trajectories/*"))


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (401, "refused the API key"),
        (403, "no access to this model"),
        (404, "unknown model or wrong base URL"),
    ],
)
def test_a_refusal_stops_the_session_before_any_task(project, openai_server, code, says):
    openai_server.preflight_answer = Status(code)
    openai_server.script([SUBMIT, SUBMIT])
    result = run(project, openai_server.base_url, "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.count(f"HTTP {code}") == 1 and says in err, err
    assert "checked before any task ran" in err
    assert SECRET not in err + result.stdout.str()
    assert len(openai_server.preflights) == 1  # once, by the controller, not per worker
    assert openai_server.requests == [] and nothing_ran(project)


def test_an_unreachable_endpoint_stops_the_session(project):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run(project, f"http://127.0.0.1:{port}/v1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cannot be reached*ConnectError*Check --super-base-url*"])
    assert nothing_ran(project)


def test_a_good_endpoint_is_checked_once_and_the_run_goes_on(project, openai_server):
    openai_server.script([SUBMIT, SUBMIT])
    result = run(project, openai_server.base_url, "-n", "2")
    result.assert_outcomes(passed=2)
    assert len(openai_server.preflights) == 1
    (check,) = openai_server.preflights
    assert check.body["max_tokens"] == 1
    assert check.headers["authorization"] == f"Bearer {SECRET}"


def test_a_busy_endpoint_is_left_to_the_tasks_retries(project, openai_server):
    openai_server.preflight_answer = Status(429, {"Retry-After": "0"})
    openai_server.script([SUBMIT, SUBMIT])
    run(project, openai_server.base_url).assert_outcomes(passed=2)


def test_no_key_with_the_default_endpoint_is_a_usage_error(project, monkeypatch):
    monkeypatch.delenv("SUPER_API_KEY")
    result = project.runpytest_subprocess(
        "tasks", "--super-agent=react", "--super-model=gpt-4o", "--super-backend=local"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no API key is set: export SUPER_API_KEY*"])


def test_preflight_asks_for_one_token_of_a_reasoning_model():
    server = FakeOpenAIServer()
    try:
        client = LLMClient(LLMSettings(model="o3-mini", base_url=server.base_url))
        assert client.preflight() is None
        (check,) = server.preflights
        assert check.body["max_completion_tokens"] == 1
        assert check.body["messages"] == [{"role": "user", "content": PREFLIGHT_PROMPT}]
        client.close()
    finally:
        server.stop()


def test_cached_prompt_tokens_reach_steps_and_results(project, openai_server):
    """(Not the preflight, but the same run set-up: usage with cached tokens, end to end.)"""
    reply = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": SUBMIT}}],
        "usage": {
            "prompt_tokens": 1000,
            "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 600},
        },
    }
    openai_server.script([Status(200, body=reply)])
    run(project, openai_server.base_url, "-k", "adder").assert_outcomes(passed=1)
    (results,) = project.path.glob("out/*/results.jsonl")
    line = json.loads(results.read_text())
    assert line["prompt_tokens"] == 1000 and line["cached_prompt_tokens"] == 600
    # gpt-4o: 400 x $2.50 + 600 x $1.25 + 10 x $10 per million
    assert line["cost_usd"] == pytest.approx(0.00185)
    (trajectory,) = project.path.glob("out/*/trajectories/adder.json")
    steps = json.loads(trajectory.read_text())["steps"]
    assert [s["cached_prompt_tokens"] for s in steps] == [600]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://[::1", "'http://[::1'"),
        ("http://user:pa55word-secret@[::1/v1", "'http://***@[::1/v1'"),
        ("ftp://example.com/v1", "'ftp://example.com/v1'"),
        ("http:///v1", "'http:///v1'"),
        ("http://example.com:99999/v1", "'http://example.com:99999/v1'"),
        ("http://example.com/v1\n", "'http://example.com/v1\\n'"),
    ],
)
def test_an_invalid_base_url_is_a_usage_error_naming_it(project, monkeypatch, url, shown):
    """Red on eb4ffc2: `http://[::1` was an INTERNALERROR (httpx.InvalidURL); the others were
    "cannot be reached" or no error at all, and the password was printed."""
    monkeypatch.setenv("SUPER_BASE_URL", url)
    result = project.runpytest_subprocess(
        "tasks", "--super-agent=react", "--super-model=gpt-4o", "--super-backend=local"
    )
    printed = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, printed[-3000:]
    assert "INTERNALERROR" not in printed
    assert f"the base URL {shown}" in printed and "SUPER_BASE_URL" in printed, printed[-3000:]
    assert "pa55word" not in printed and nothing_ran(project)


SHORT_PREFLIGHT = "import pytest_super.llm\npytest_super.llm.PREFLIGHT_TIMEOUT_S = 2.0\n"


@pytest.mark.timeout(120)
def test_a_trickling_preflight_stops_the_session_at_its_deadline(project):
    """Red on eb4ffc2: the preflight's timeout bounded each read: a status line and then a header
    byte every 0.5 s kept the session waiting before any task (pytest-timeout ended it)."""
    from tests.support.openai_server import TrickleServer

    project.makeconftest(SHORT_PREFLIGHT)  # the preflight's deadline, 2 s instead of 90
    server = TrickleServer(b"HTTP/1.1 200 OK\r\n", b"X-Slow: " + b"a" * 100_000, interval=0.5)
    try:
        started = time.monotonic()
        result = run(project, server.base_url)
        took = time.monotonic() - started
    finally:
        server.stop()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*did not answer within 2 s*checked before any task ran*"])
    assert took < 30 and nothing_ran(project)
