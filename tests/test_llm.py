"""Pins the LLM client against a real HTTP server: request shape, retries, refusals, cost, cache."""

from __future__ import annotations

import email.utils
import json
import time

import pytest

from pytest_super.errors import LLMError, LLMRefused
from pytest_super.llm import (
    Completion,
    LLMClient,
    LLMSettings,
    _retry_after,
    api_key_from_env,
    model_prices,
)
from tests.support.openai_server import Status

KEY = "sk-test-0123456789abcdefSECRET"


class Sleeps(list):
    """An injected sleep that records the waits instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(server, *, sleep=None, **overrides) -> LLMClient:
    overrides.setdefault("model", "gpt-4o")
    settings = LLMSettings(base_url=server.base_url, api_key=KEY, **overrides)
    return LLMClient(settings, sleep=sleep if sleep is not None else Sleeps())


MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Query: 2+2?"}]


def test_request_shape_usage_and_cost(openai_server):
    openai_server.script(["Thought: four\nAction: submit\n<content>\n4\n</content>\nrest"])
    with client(openai_server) as llm:
        reply = llm.complete(MESSAGES, stop=["</content>", "Observation:"])
    assert reply.text == "Thought: four\nAction: submit\n<content>\n4\n"  # cut at the stop string
    request = openai_server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "gpt-4o",
        "messages": MESSAGES,
        "temperature": 0.2,
        "top_p": 0.5,
        "max_tokens": 1500,
        "stop": ["</content>", "Observation:"],
    }
    prompt_chars = sum(len(m["content"]) for m in MESSAGES)
    assert reply.prompt_tokens == prompt_chars // 4
    assert reply.completion_tokens == len(reply.text) // 4
    assert reply.cost_usd == pytest.approx(
        (reply.prompt_tokens * 2.5 + reply.completion_tokens * 10.0) / 1e6
    )
    assert not reply.cached


def test_no_key_sends_no_authorization_header(openai_server):
    openai_server.script(["hi"])
    settings = LLMSettings(model="llama3", base_url=openai_server.base_url)
    with LLMClient(settings) as llm:
        reply = llm.complete(MESSAGES)
    assert "authorization" not in openai_server.requests[0].headers
    assert reply.cost_usd == 0.0  # unknown model, no prices given


def test_price_table_and_overrides():
    assert model_prices(LLMSettings(model="gpt-4o-2024-08-06")) == (2.5, 10.0)
    assert model_prices(LLMSettings(model="gpt-4o-mini-2024-07-18")) == (0.15, 0.6)
    assert model_prices(LLMSettings(model="openai/gpt-4.1-mini")) == (0.4, 1.6)
    assert model_prices(LLMSettings(model="my-local-model")) == (0.0, 0.0)
    assert model_prices(LLMSettings(model="gpt-4o", price_in=1.0)) == (1.0, 10.0)


def test_reasoning_models_get_max_completion_tokens(openai_server):
    openai_server.script(["ok"])
    with client(openai_server, model="o3-mini") as llm:
        llm.complete(MESSAGES, stop=["</content>"])
    body = openai_server.requests[0].body
    assert body["max_completion_tokens"] == 1500
    assert not {"temperature", "top_p", "max_tokens", "stop"} & set(body)


def test_429_and_500_are_retried_honouring_retry_after(openai_server):
    openai_server.script(
        [Status(429, {"Retry-After": "7"}), Status(500), Status(503, {"Retry-After": "0"}), "done"]
    )
    sleeps = Sleeps()
    with client(openai_server, sleep=sleeps) as llm:
        assert llm.complete(MESSAGES).text == "done"
    assert len(openai_server.requests) == 4
    assert sleeps[0] == 7.0 and sleeps[2] == 0.0
    assert 0.0 <= sleeps[1] <= 2.0  # full jitter on the second try: uniform(0, 1 * 2**1)


def test_retries_are_bounded(openai_server):
    openai_server.script([Status(500)] * 10)
    sleeps = Sleeps()
    with client(openai_server, sleep=sleeps, max_retries=3) as llm, pytest.raises(LLMError) as err:
        llm.complete(MESSAGES)
    assert len(openai_server.requests) == 4
    assert len(sleeps) == 3
    assert "failed after 4 tries" in str(err.value) and "HTTP 500" in str(err.value)


def test_script_running_out_is_a_clear_500(openai_server):
    with client(openai_server, max_retries=0) as llm, pytest.raises(LLMError, match="ran out"):
        llm.complete(MESSAGES)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (401, "refused the API key"),
        (403, "no access"),
        (404, "unknown model or wrong base URL"),
        (400, "rejected the request"),
    ],
)
def test_refusals_stop_at_once_without_leaking_the_key(openai_server, code, words):
    # OpenAI's own 401 message quotes (part of) the key: it must be scrubbed
    body = {"error": {"message": f"Incorrect API key provided: {KEY}. Or {KEY[:8]}****CRET."}}
    openai_server.script([Status(code, body=body)])
    sleeps = Sleeps()
    with client(openai_server, sleep=sleeps) as llm, pytest.raises(LLMRefused) as err:
        llm.complete(MESSAGES)
    assert len(openai_server.requests) == 1 and not sleeps
    message = str(err.value)
    assert f"HTTP {code}" in message and words in message
    assert KEY not in message and KEY[:8] not in message
    assert "<API key>" in message


def test_connection_errors_are_retried_then_reported(openai_server):
    port = openai_server.port
    openai_server.stop()  # nothing listens any more
    sleeps = Sleeps()
    settings = LLMSettings(
        model="gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=2
    )
    with LLMClient(settings, sleep=sleeps) as llm, pytest.raises(LLMError) as err:
        llm.complete(MESSAGES)
    assert len(sleeps) == 2
    assert "ConnectError" in str(err.value) and KEY not in str(err.value)


def test_key_never_in_repr():
    settings = LLMSettings(model="gpt-4o", api_key=KEY)
    assert KEY not in repr(settings)
    with LLMClient(settings) as llm:
        assert KEY not in repr(llm)


def test_retry_after_parsing():
    assert _retry_after(None) is None
    assert _retry_after("3") == 3.0
    assert _retry_after("garbage") is None
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= _retry_after(soon) <= 31
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert _retry_after(past) == 0.0


def test_api_key_from_env(monkeypatch):
    monkeypatch.delenv("SUPER_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert api_key_from_env() is None
    monkeypatch.setenv("OPENAI_API_KEY", "b")
    assert api_key_from_env() == "b"
    monkeypatch.setenv("SUPER_API_KEY", "a")
    assert api_key_from_env() == "a"


def test_cache_replays_without_requests_same_tokens_zero_cost(openai_server, tmp_path):
    cache = tmp_path / "cache"
    openai_server.script(["first answer", "second answer"])
    with client(openai_server, cache_dir=str(cache)) as llm:
        first = llm.complete(MESSAGES, stop=["</content>"])
        again = llm.complete(MESSAGES, stop=["</content>"])
        other = llm.complete(MESSAGES, stop=["Observation:"])  # another body: another key
    assert len(openai_server.requests) == 2
    assert again == Completion(first.text, first.prompt_tokens, first.completion_tokens, 0.0, True)
    assert first.cost_usd > 0 and other.text == "second answer"
    files = [p for p in cache.rglob("*.json")]
    assert len(files) == 2
    for path in files:
        json.loads(path.read_text())
        assert KEY not in path.read_text()


def test_timeouts_are_retried(openai_server):
    # a server that accepts but never answers in time: httpx raises ReadTimeout
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        settings = LLMSettings(
            model="gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, timeout_s=0.2
        )
        sleeps = Sleeps()
        with LLMClient(settings, sleep=sleeps) as llm, pytest.raises(LLMError, match="timed out"):
            llm.complete(MESSAGES)
        assert len(sleeps) == 1
    finally:
        listener.close()


# -- cached prompt tokens ------------------------------------------------------------------------
def reply_with_cache(prompt: int, cached: int, completion: int) -> Status:
    """A 200 answer whose usage says `cached` of the `prompt` tokens came from the provider's cache
    (OpenAI's `usage.prompt_tokens_details.cached_tokens`)."""
    return Status(
        200,
        body={
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        },
    )


def test_cached_prompt_tokens_are_recorded_and_priced_at_the_cached_rate(openai_server):
    openai_server.script([reply_with_cache(1000, 600, 10)])
    with LLMClient(LLMSettings(model="gpt-4o-2024-08-06", base_url=openai_server.base_url)) as c:
        reply = c.complete([{"role": "user", "content": "hi"}])
    assert (reply.prompt_tokens, reply.cached_prompt_tokens, reply.completion_tokens) == (
        1000,
        600,
        10,
    )
    # gpt-4o: 400 uncached x $2.50 + 600 cached x $1.25 + 10 x $10.00 per million = $0.00185
    assert reply.cost_usd == pytest.approx((400 * 2.50 + 600 * 1.25 + 10 * 10.00) / 1e6)


def test_cached_tokens_without_a_cached_rate_cost_the_prompt_price(openai_server):
    openai_server.script([reply_with_cache(1000, 600, 0), reply_with_cache(1000, 600, 0)])
    # gpt-4o-2024-05-13 has its own price and no cached rate in the table: 1000 x $5.00
    settings = LLMSettings(model="gpt-4o-2024-05-13", base_url=openai_server.base_url)
    with LLMClient(settings) as c:
        assert c.complete([{"role": "user", "content": "a"}]).cost_usd == pytest.approx(5000 / 1e6)
    # --super-price 1,2,0.1: 400 x $1 + 600 x $0.10
    settings = LLMSettings(
        model="mine", base_url=openai_server.base_url, price_in=1, price_out=2, price_cached=0.1
    )
    with LLMClient(settings) as c:
        assert c.complete([{"role": "user", "content": "b"}]).cost_usd == pytest.approx(460 / 1e6)


def test_usage_without_details_has_no_cached_tokens(openai_server):
    openai_server.script(["plain"])
    with LLMClient(LLMSettings(model="gpt-4o", base_url=openai_server.base_url)) as c:
        assert c.complete([{"role": "user", "content": "x"}]).cached_prompt_tokens == 0


# -- the cache holds what a trajectory may hold ----------------------------------------------------
def test_cache_files_are_owner_only_and_hold_no_secret(openai_server, tmp_path):
    """Red on eb4ffc2: the raw reply was written (the echoed key twice: in the text and in the
    id), 0644 in 0755 folders."""
    password = "cache-passw0rd-31337"
    cache = tmp_path / "cache"
    echoed = {
        "id": f"chatcmpl-{KEY}",
        "choices": [{"message": {"role": "assistant", "content": f"key {KEY}, pw {password}"}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
    }
    openai_server.script([Status(200, body=echoed)])
    base_url = openai_server.base_url.replace("http://", f"http://user:{password}@")
    settings = LLMSettings(model="gpt-4o", base_url=base_url, api_key=KEY, cache_dir=str(cache))
    with LLMClient(settings) as llm:
        first = llm.complete(MESSAGES)
        again = llm.complete(MESSAGES)
    assert first.text == "key <API key>, pw <password>"
    assert (again.text, again.prompt_tokens, again.completion_tokens) == (first.text, 12, 3)
    assert again.cached and len(openai_server.requests) == 1
    (path,) = cache.rglob("*.json")
    text = path.read_text()
    assert KEY not in text and password not in text and "chatcmpl" not in text, text
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.stat().st_mode & 0o777 for p in (cache, path.parent)] == [0o700, 0o700]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "deep", "folder"])
def test_a_cache_entry_that_does_not_read_is_asked_again(openai_server, tmp_path, kind):
    """Red on eb4ffc2: a FIFO at the entry's path blocked the call forever; an entry nested
    100,000 deep raised RecursionError (a harness error); a folder, IsADirectoryError."""
    import os

    cache = tmp_path / "cache"
    openai_server.script(["fresh"])
    with client(openai_server, cache_dir=str(cache)) as llm:
        path = llm._cache_file(llm.request_body(MESSAGES))
        assert path is not None
        path.parent.mkdir(parents=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "deep":
            path.write_text("[" * 100_000 + "]" * 100_000)
        else:
            path.mkdir()
        assert llm.complete(MESSAGES).text == "fresh"
    assert len(openai_server.requests) == 1
