"""The circuit breaker's counting (pytest_super/llm/breaker.py) against a real endpoint on
127.0.0.1: failures with no answer trip it only when the check fails too; a refusal of one
request never counts. The whole run (a killed endpoint in a 20-task run, the resume) is
tests/attacks/test_endpoint_breaker.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_super.errors import LLMRefused
from pytest_super.llm import LLMClient, LLMSettings
from pytest_super.llm.breaker import ENDPOINT_DOWN_FILE, EndpointDown
from tests.support.openai_server import FakeOpenAIServer, Status

NOW = {"Retry-After": "0"}


def client(server: FakeOpenAIServer, run_dir: Path, threshold: int = 3) -> LLMClient:
    settings = LLMSettings(
        model="gpt-4o",
        base_url=server.base_url,
        max_retries=6,
        breaker_threshold=threshold,
        down_flag=str(run_dir / ENDPOINT_DOWN_FILE),
    )
    return LLMClient(settings, sleep=lambda s: None)


def test_server_faults_then_a_failed_check_trip_the_breaker_for_every_client(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.script([Status(500, NOW)] * 10)
    openai_server.preflight_answer = Status(503)
    with client(openai_server, tmp_path) as first, pytest.raises(EndpointDown) as down:
        first.complete([{"role": "user", "content": "hi"}])
    assert len(openai_server.requests) == 3  # the third failure in a row: checked, then stopped
    assert len(openai_server.preflights) == 1
    flag = tmp_path / ENDPOINT_DOWN_FILE
    assert flag.read_text() == str(down.value)
    assert openai_server.base_url in str(down.value) and "HTTP 503" in str(down.value)
    openai_server.script(["fine"])
    with client(openai_server, tmp_path) as other, pytest.raises(EndpointDown):
        other.complete([{"role": "user", "content": "hi"}])  # another task: not even sent
    assert len(openai_server.requests) == 3


def test_an_endpoint_that_answers_the_check_does_not_trip_it(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.script([Status(500, NOW)] * 4 + ["fine"])
    with client(openai_server, tmp_path) as llm:
        assert llm.complete([{"role": "user", "content": "hi"}]).text == "fine"
    assert len(openai_server.preflights) == 1  # checked once, at the third failure: it answered
    assert not (tmp_path / ENDPOINT_DOWN_FILE).exists()


def test_a_refused_request_does_not_count(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    openai_server.script([Status(400)] * 5)
    openai_server.preflight_answer = Status(503)
    for _ in range(5):
        with client(openai_server, tmp_path, threshold=2) as llm, pytest.raises(LLMRefused):
            llm.complete([{"role": "user", "content": "hi"}])
    assert openai_server.preflights == [] and not (tmp_path / ENDPOINT_DOWN_FILE).exists()
