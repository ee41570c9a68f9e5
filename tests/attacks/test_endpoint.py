"""Round four of attacks from the model endpoint (issue 29, cause 3): credentials in the base URL,
a preflight and a call whose answer trickles (headers or body), a preflight answered by a gzip
bomb, replies nested 100,000 deep and other replies no decoder takes. Each against a real server
on 127.0.0.1; the end-to-end run is a real pytest process."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_super import redaction
from pytest_super.errors import ExitStatus, LLMError, LLMRefused
from pytest_super.llm import LLMClient, LLMSettings
from pytest_super.runner import exit_status_of
from tests.support.attack_runs import PEAK_KB
from tests.support.openai_server import FakeOpenAIServer, Raw, Status, TrickleServer

KEY = "sk-test-0123456789abcdef-endpoint"
USER, PASSWORD, TOKEN = "proxyuser", "pr0xy-passw0rd-9876", "qt-7d1e5c0ffee42"
MESSAGES = [{"role": "user", "content": "hi"}]
#: a call with a total deadline of 2 s (two tries at most) ends long before this; one without it
#: never ends (a byte every 0.5 s): pytest-timeout stops it at 60 s. No bound near the 4 s it takes
#: (issue 42): the machine's load decided those.
TOTAL_BOUND_S = 30

#: a status line, then a header that never ends (one byte a tick)
HEADERS_TRICKLE = (b"HTTP/1.1 200 OK\r\n", b"X-Slow: " + b"a" * 100_000)
#: whole headers, then a body that never ends
BODY_TRICKLE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
    b" " * 100_000,
)


def _deep(depth: int = 100_000) -> bytes:
    return b"[" * depth + b"]" * depth


def _client(base_url: str, **overrides) -> LLMClient:
    overrides.setdefault("max_retries", 1)
    return LLMClient(
        LLMSettings(model="gpt-4o", base_url=base_url, api_key=KEY, **overrides),
        sleep=lambda s: None,
    )


# -- deadlines -----------------------------------------------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize("trickle", [HEADERS_TRICKLE, BODY_TRICKLE], ids=["headers", "body"])
def test_a_call_has_a_total_deadline_while_headers_or_body_trickle(trickle) -> None:
    """Red on eb4ffc2 (headers): httpx's read timeout bounds each read, a byte came every 0.5 s,
    the call never ended (pytest-timeout stopped it at 60 s). The body case held already."""
    server = TrickleServer(*trickle, interval=0.5)
    try:
        started = time.monotonic()
        with _client(server.base_url, timeout_s=2) as llm, pytest.raises(LLMError) as err:
            llm.complete(MESSAGES)
        took = time.monotonic() - started
    finally:
        server.stop()
    assert "timed out" in str(err.value) and "failed after 2 tries" in str(err.value)
    assert server.answered == 2
    assert took < TOTAL_BOUND_S, f"two tries of 2 s took {took:.1f} s"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("trickle", [HEADERS_TRICKLE, BODY_TRICKLE], ids=["headers", "body"])
def test_the_preflight_has_a_total_deadline(trickle) -> None:
    """Red on eb4ffc2: the preflight's 90 s bounded each read; a byte every 0.5 s never timed out."""
    server = TrickleServer(*trickle, interval=0.5)
    try:
        started = time.monotonic()
        with _client(server.base_url, timeout_s=2) as llm:
            problem = llm.preflight()
        took = time.monotonic() - started
    finally:
        server.stop()
    assert problem is not None and not problem.reached, problem
    assert "did not answer within 2 s" in problem.message, problem.message
    assert took < TOTAL_BOUND_S, f"the preflight took {took:.1f} s"


@pytest.mark.timeout(60)
def test_the_total_deadline_holds_through_an_environment_s_proxy(monkeypatch) -> None:
    """Red on eb4ffc2: through HTTP_PROXY too (its own connection pool), headers trickling at a
    byte every 0.5 s never timed out."""
    server = TrickleServer(*HEADERS_TRICKLE, interval=0.5)
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    try:
        started = time.monotonic()
        with (
            _client("http://endpoint.invalid/v1", timeout_s=2) as llm,
            pytest.raises(LLMError) as err,
        ):
            llm.complete(MESSAGES)
        took = time.monotonic() - started
    finally:
        server.stop()
    assert "total deadline of 2 s" in str(err.value) and server.answered == 2
    assert took < TOTAL_BOUND_S, f"two tries of 2 s took {took:.1f} s"


# -- reply caps ----------------------------------------------------------------------------------
PREFLIGHT_IN_A_PROCESS = (
    """
import json, sys
from pytest_super.llm import LLMClient, LLMSettings
with LLMClient(LLMSettings(model="m", base_url=sys.argv[1])) as client:
    problem = client.preflight()
peak_kb = """
    + PEAK_KB
    + """
print(json.dumps({"problem": problem and [problem.message, problem.reached], "peak_kb": peak_kb}))
"""
)


@pytest.mark.timeout(300)
def test_a_gzip_bomb_answering_the_preflight_is_cut_while_it_inflates(openai_server) -> None:
    """Red on eb4ffc2: the preflight read the whole body (1 GiB inflated; the issue measured
    2,099 MB) and called the endpoint fine."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as f:
        for _ in range(64):
            f.write(bytes(1 << 24))
    assert len(out.getvalue()) < 2_000_000
    openai_server.preflight_answer = Raw(out.getvalue(), {"Content-Encoding": "gzip"})
    done = subprocess.run(
        [sys.executable, "-c", PREFLIGHT_IN_A_PROCESS, openai_server.base_url],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    peak_mb = result["peak_kb"] // 1024
    print(f"preflight peak RSS {peak_mb} MB")
    assert result["problem"] is not None, result
    message, reached = result["problem"]
    assert reached and "larger than" in message, message
    assert peak_mb < 400, f"peak RSS {peak_mb} MB"


# -- replies no decoder takes --------------------------------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "answer",
    [
        Raw(_deep()),
        Raw(b'{"choices": [{"message": {"content": ' + _deep() + b"}}]}"),
        Raw(b'{"choices": [{"message": {"content": "ok"}}], "usage": ' + _deep() + b"}"),
        Raw(b"not gzip at all", {"Content-Encoding": "gzip"}),
        Raw(b"\xff\xfe{ not utf-8 }"),
    ],
    ids=["deep", "deep-content", "deep-usage", "bad-gzip", "bad-utf8"],
)
def test_a_reply_no_decoder_takes_is_the_endpoints_error_and_retried(openai_server, answer):
    """Red on eb4ffc2: RecursionError (deep, deep-content, deep-usage) and httpx.DecodingError
    (bad-gzip) escaped the client: the task was our bug (`harness_error`), not retried."""
    openai_server.script([answer, answer])
    with _client(openai_server.base_url) as llm, pytest.raises(LLMError) as err:
        llm.complete(MESSAGES)
    assert not isinstance(err.value, LLMRefused)
    assert "failed after 2 tries" in str(err.value), err.value
    assert exit_status_of(err.value) is ExitStatus.LLM_ERROR
    assert len(openai_server.requests) == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("code", [400, 503])
def test_an_error_answer_nested_deep_is_read_as_the_endpoints(code) -> None:
    """Red on eb4ffc2: the server's message was read with `response.json()` catching ValueError
    alone: RecursionError escaped (400: not a refusal; 503: not retried)."""
    body = b'{"error": {"message": ' + _deep() + b"}}"
    server = TrickleServer(
        f"HTTP/1.1 {code} X\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 0\r\n\r\n".encode()
        + body,
        b"",
    )
    try:
        with _client(server.base_url) as llm, pytest.raises(LLMError) as err:
            llm.complete(MESSAGES)
    finally:
        server.stop()
    assert f"HTTP {code}" in str(err.value)
    assert isinstance(err.value, LLMRefused) == (code == 400)
    assert server.answered == (1 if code == 400 else 2)


# -- secrets in the base URL ---------------------------------------------------------------------
def test_the_base_url_s_credentials_and_query_values_are_the_run_s_secrets() -> None:
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1?api-version=2024-02-01&token={TOKEN}"
    assert redaction.masked_url(url) == "http://***@127.0.0.1:9/v1?api-version=2024-02-01&token=***"
    assert redaction.masked_url("http://u:p@[::1") == "http://***@[::1"
    LLMSettings(model="m", base_url=url)
    said = f"GET {url} as {USER}:{PASSWORD}; password {PASSWORD}, token {TOKEN}; 2024-02-01"
    shown = redaction.redact(said)
    assert PASSWORD not in shown and TOKEN not in shown, shown
    assert shown.endswith("2024-02-01")  # Azure's api-version is no secret


ECHO_TASK = """\
id: echo
query: 'Report x as a json structured as follows: {"x": 0}.'
answer: {x: 1}
solution:
  - execute: |
      print('{"x": 1}')
"""


@pytest.mark.timeout(300)
def test_credentials_in_the_base_url_reach_no_file_and_no_terminal(
    pytester: pytest.Pytester, monkeypatch
) -> None:
    """Red on eb4ffc2: the password was in the JUnit file (twice), the trajectory, results.jsonl
    and the console (seven times); the query's token likewise. Here a proxy with basic auth keeps
    failing (503) and quotes the URL it was asked for in its error message."""
    server = FakeOpenAIServer()
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/v1?token={TOKEN}"
    failure = Status(503, {"Retry-After": "0"}, {"error": {"message": f"upstream {url} is down"}})
    server.script([failure] * 60)
    monkeypatch.setenv("SUPER_API_KEY", KEY)
    monkeypatch.setenv("SUPER_BASE_URL", url)
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    (pytester.path / "tasks" / "expert").mkdir(parents=True)
    (pytester.path / "tasks" / "expert" / "echo.yaml").write_text(ECHO_TASK)
    try:
        result = pytester.runpytest_subprocess(
            "tasks",
            "--super-agent=react",
            "--super-model=gpt-4o",
            "--super-backend=local",
            "--super-live",
            "--super-llm-breaker=0",  # one preflight: the breaker's own check is not this test's
            f"--junitxml={pytester.path / 'junit.xml'}",
            "-p",
            "no:cacheprovider",
            "-rA",
            "--log-level=WARNING",
        )
    finally:
        server.stop()
    assert len(server.preflights) == 1 and len(server.requests) >= 7
    printed = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in printed, printed[-3000:]
    result.assert_outcomes(errors=1)
    assert "http://***@127.0.0.1" in printed, printed[-3000:]
    written = [p for p in Path(pytester.path).rglob("*") if p.is_file()]
    reports = [p for p in written if "reports" in p.parts or p.name == "junit.xml"]
    names = {p.name for p in reports}
    assert {"junit.xml", "results.jsonl", "echo.json"} <= names, names
    for shown_in in ("junit.xml", "echo.json"):  # the failure is there, the URL masked
        (path,) = [p for p in reports if p.name == shown_in]
        assert "http://***@127.0.0.1" in path.read_text(), shown_in
    (results,) = [p for p in reports if p.name == "results.jsonl"]
    assert json.loads(results.read_text())["exit_status"] == "llm_error"
    for secret in (PASSWORD, TOKEN, f"{USER}:"):
        assert secret not in printed, f"{secret} printed"
        leaked = [p.name for p in reports if secret in p.read_text(errors="replace")]
        assert leaked == [], f"{secret} in {leaked}"
