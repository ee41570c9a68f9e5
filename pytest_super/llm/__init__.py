"""The LLM client: one OpenAI-compatible `/chat/completions` endpoint, over httpx.

Owns `LLMClient` (the check before a run, one call, the request body) and is the facade of the
package, split by concern:

- `settings`: `LLMSettings` (model, endpoint, sampling, prices, cache), `api_key_from_env`, the
  endpoint's URL and what makes a base URL unusable;
- `transport`: the httpx client, the total deadline of every request from connect to last byte
  (`_DeadlineBackend`: headers that trickle in time out as a body does) and the bound on the
  answer's decompressed size (`max_reply_bytes`);
- `retries`: which failures are retried, backoff and `Retry-After`, when to give up;
- `replies`: reading a reply, an error answer and a refusal, scrubbed of the run's secrets;
- `accounting`: `Completion`, the built-in price table and the cost of a call;
- `cache`: the on-disk response cache.

The API key is sent only in the `Authorization` header. It never appears in an exception message,
a log line, a repr or a cache file: error texts that come back from the server are scrubbed of it.
The base URL's credentials and query values are secrets too (`redaction.register_url`): the URL
is shown masked (`redaction.masked_url`). Whatever the endpoint sends that cannot be decoded or
read is the endpoint's error (`LLMError`), never the harness's.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from pytest_super import redaction
from pytest_super.errors import LLMError, LLMRefused
from pytest_super.llm.accounting import (
    CACHED_PRICES,
    MAX_USAGE_TOKENS,
    PRICES,
    Completion,
    cached_prompt_price,
    completion_cost,
    model_prices,
)
from pytest_super.llm.breaker import Breaker, breaker_for
from pytest_super.llm.cache import (
    MAX_CACHE_ENTRY_BYTES,
    cache_file,
    read_cache_entry,
    write_cache_entry,
)
from pytest_super.llm.replies import ReplyReader, refusal, scrub
from pytest_super.llm.retries import RETRY_STATUSES, Endpoint, post_with_retries
from pytest_super.llm.retries import retry_after as _retry_after
from pytest_super.llm.settings import (
    BASE_URL_SETTING,
    LLMSettings,
    api_key_from_env,
    base_url_problem,
    chat_url,
)
from pytest_super.llm.transport import (
    REPLY_BYTES_PER_TOKEN,
    REPLY_ENVELOPE_BYTES,
    ReplyTooLarge,
    http_client,
    max_reply_bytes,
    post_once,
)
from pytest_super.strictjson import JSON

__all__ = [
    "BASE_URL_SETTING",
    "CACHED_PRICES",
    "MAX_CACHE_ENTRY_BYTES",
    "MAX_USAGE_TOKENS",
    "PREFLIGHT_PROMPT",
    "PREFLIGHT_TIMEOUT_S",
    "PRICES",
    "REPLY_BYTES_PER_TOKEN",
    "REPLY_ENVELOPE_BYTES",
    "Completion",
    "LLMClient",
    "LLMSettings",
    "PreflightProblem",
    "ReplyTooLarge",
    "_retry_after",
    "api_key_from_env",
    "base_url_problem",
    "cached_prompt_price",
    "chat_url",
    "completion_cost",
    "max_reply_bytes",
    "model_prices",
]

log = logging.getLogger(__name__)

#: The preflight request's prompt (a one-token answer; the test server knows it by this text).
PREFLIGHT_PROMPT = "pytest-super checks the endpoint before a run: reply with the word ok."
#: Seconds the preflight waits: a cold local server (vLLM, Ollama) loads its model on the first
#: request, which can take a minute; longer than that, the tasks would suffer too.
PREFLIGHT_TIMEOUT_S = 90.0

#: reasoning models take `max_completion_tokens` and reject temperature, top_p and stop
_REASONING = re.compile(r"^(o\d|gpt-5)")


@dataclass(frozen=True)
class PreflightProblem:
    """Why the preflight request failed: refused, a broken answer or a base URL that is no URL
    (`reached`: a usage error whatever the LLM cache holds), or no answer at all."""

    message: str
    reached: bool


class LLMClient:
    """Talks to one OpenAI-compatible endpoint.

    `complete` retries 429, 408/409, 5xx, connection errors and timeouts with exponential backoff
    and full jitter (honouring `Retry-After`), at most `max_retries` times, then raises `LLMError`.
    401, 403, 404 and other 4xx answers raise `LLMRefused` (an `LLMError`) at once (`retries`).

    With `cache_dir`, replies are stored under the SHA-256 of the request body (model, messages,
    sampling, stop; never the key). A cache hit returns the stored reply with the same token counts,
    so token budgets replay identically, but with cost 0 (no money was spent) (`cache`).
    """

    def __init__(
        self, settings: LLMSettings, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        redaction.register(settings.api_key)
        redaction.register_url(settings.base_url)
        #: why the base URL cannot be asked (every call is then refused); None when it can
        self._url_problem = base_url_problem(settings.base_url)
        self._url = "" if self._url_problem else str(chat_url(settings.base_url))
        #: the URL as messages show it, its secrets masked
        self._shown_url = redaction.masked_url(self._url or settings.base_url)
        self._replies = ReplyReader(self._shown_url, settings.api_key)
        headers = {"Content-Type": "application/json"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._http = http_client(headers, settings.timeout_s)
        self._cache = Path(settings.cache_dir) if settings.cache_dir else None
        self._breaker = self._run_breaker()

    def __repr__(self) -> str:
        shown = redaction.masked_url(self.settings.base_url)
        return f"LLMClient(model={self.settings.model!r}, base_url={shown!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the check before a run --------------------------------------------------------------
    def preflight(self) -> PreflightProblem | None:
        """One small request (a one-token reply to `PREFLIGHT_PROMPT`, never cached) that checks
        the endpoint, the key and the model before any task starts.

        Returns None when the endpoint answered (200, or a busy or failing server that the tasks'
        own retries deal with), else the problem: the base URL is no URL, the endpoint refused
        the request (401, 403, 404 and other 4xx but 408/409/429), sent an answer that cannot be
        read (larger than the reply cap, a broken encoding), or could not be reached or did not
        answer within its total deadline (`PREFLIGHT_TIMEOUT_S`, at most `timeout_s`).
        """
        if self._url_problem:
            return PreflightProblem(self._url_problem, reached=True)
        body = self._one_token_body()
        where = self._where()
        limit = min(PREFLIGHT_TIMEOUT_S, self.settings.timeout_s)
        key = self.settings.api_key
        try:
            response = self._post_once(body, limit)
        except httpx.TimeoutException as exc:
            return PreflightProblem(
                f"LLM endpoint {where} did not answer within {limit:g} s "
                f"({type(exc).__name__}). Check --super-base-url and the endpoint.",
                reached=False,
            )
        except httpx.TransportError as exc:
            return PreflightProblem(
                f"LLM endpoint {where} cannot be reached: {type(exc).__name__}: "
                f"{scrub(str(exc), key)}. Check --super-base-url and the network.",
                reached=False,
            )
        except (httpx.RequestError, ReplyTooLarge) as exc:  # reached, but the answer is broken
            return PreflightProblem(
                f"LLM endpoint {where} answered a one-token request with an answer that cannot "
                f"be read: {type(exc).__name__}: {scrub(str(exc), key)}. Check that the base "
                "URL serves OpenAI's chat-completions protocol.",
                reached=True,
            )
        code = response.status_code
        if code == 200 or code in RETRY_STATUSES:
            return None
        return PreflightProblem(refusal(response, where, key), reached=True)

    def _run_breaker(self) -> Breaker | None:
        """The process's circuit breaker on this endpoint for the run (llm/breaker.py); None
        without a run folder's flag file (a client outside a run)."""
        s = self.settings
        if not s.down_flag or self._url_problem or s.breaker_threshold <= 0:
            return None
        flag = Path(s.down_flag)
        return breaker_for(
            (self._url, s.model, str(flag)),
            lambda: Breaker(s.breaker_threshold, lambda: check_endpoint(s), flag, self._where()),
        )

    def unreachable(self, limit: float) -> str | None:
        """Why the endpoint gives no answer to a one-token request within `limit` seconds (no
        connection, a timeout, an HTTP 5xx); None when it answers."""
        body = self._one_token_body()
        try:
            response = self._post_once(body, min(limit, self.settings.timeout_s))
        except (httpx.RequestError, ReplyTooLarge) as exc:
            return f"{type(exc).__name__}: {scrub(str(exc), self.settings.api_key)}"
        if response.status_code >= 500:
            return f"HTTP {response.status_code}"
        return None

    def _one_token_body(self) -> dict[str, object]:
        """The check's request: a one-token reply to `PREFLIGHT_PROMPT`."""
        body = self.request_body([{"role": "user", "content": PREFLIGHT_PROMPT}])
        body["max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"] = 1
        return body

    # -- the call ------------------------------------------------------------------------------
    def complete(
        self, messages: list[dict[str, str]], *, stop: list[str] | None = None
    ) -> Completion:
        """Ask the model for one reply to `messages` (stop strings are not part of the reply)."""
        if self._url_problem:
            raise LLMRefused(self._url_problem)
        body = self.request_body(messages, stop=stop)
        path = self._cache_file(body)
        data = read_cache_entry(path) if path is not None else None
        if data is not None:
            try:
                text, prompt_tokens, completion_tokens, cached = self._replies.read(data, body)
            except LLMError:
                log.warning("ignoring unreadable LLM cache file %s", path)
            else:
                return Completion(
                    text, prompt_tokens, completion_tokens, 0.0, True, cached_prompt_tokens=cached
                )
        data = self._post(body)
        text, prompt_tokens, completion_tokens, cached = self._replies.read(data, body)
        if path is not None:
            write_cache_entry(path, text, prompt_tokens, completion_tokens, cached)
        cost = completion_cost(self.settings, prompt_tokens, cached, completion_tokens)
        return Completion(text, prompt_tokens, completion_tokens, cost, cached_prompt_tokens=cached)

    def request_body(
        self, messages: list[dict[str, str]], *, stop: list[str] | None = None
    ) -> dict[str, object]:
        """The JSON body sent for `messages` (also what the cache key is computed from)."""
        s = self.settings
        body: dict[str, object] = {"model": s.model, "messages": messages}
        if _REASONING.match(s.model.rsplit("/", 1)[-1].lower()):
            body["max_completion_tokens"] = s.max_tokens
        else:
            body.update(temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens)
            if stop:
                body["stop"] = list(stop)
        return body

    def _cache_file(self, body: Mapping[str, object]) -> Path | None:
        return None if self._cache is None else cache_file(self._cache, body)

    def _where(self) -> str:
        return f"{self._shown_url} (model {self.settings.model!r})"

    def _post(self, body: Mapping[str, object]) -> JSON:
        """The decoded answer to `body`, retried as `retries` says."""
        endpoint = Endpoint(
            send=lambda: self._post_once(body),
            where=self._where(),
            api_key=self.settings.api_key,
            max_retries=self.settings.max_retries,
            sleep=self._sleep,
            breaker=self._breaker,
        )
        return post_with_retries(endpoint)

    def _post_once(self, body: Mapping[str, object], limit: float | None = None) -> httpx.Response:
        """One POST within a total deadline of `limit` (default `timeout_s`) from connect to
        last byte, the answer read up to `max_reply_bytes` (`transport.post_once`)."""
        limit = self.settings.timeout_s if limit is None else limit
        return post_once(self._http, self._url, body, limit, self.settings)


def check_endpoint(settings: LLMSettings) -> str | None:
    """The circuit breaker's check: why the endpoint cannot be reached (None: it answers), with a
    client of its own (the task's may be closed by then)."""
    with LLMClient(settings) as client:
        return client.unreachable(settings.breaker_check_s)
