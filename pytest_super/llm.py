"""The LLM client: one OpenAI-compatible `/chat/completions` endpoint, over httpx.

Owns: `LLMSettings` (model, endpoint, sampling, prices, cache), `api_key_from_env`, `Completion`,
`LLMClient` (retries with backoff, clear errors, usage and cost, an on-disk response cache) and the
built-in price table.

The API key is sent only in the `Authorization` header. It never appears in an exception message,
a log line, a repr or a cache file: error texts that come back from the server are scrubbed of it.
The base URL's credentials and query values are secrets too (`redaction.register_url`): the URL
is shown masked (`redaction.masked_url`).

Every request, the preflight's too, has a total deadline from connect to last byte, enforced on
every socket operation (`_DeadlineBackend`: headers that trickle in time out as a body does), and
a bound on the answer's decompressed size (`max_reply_bytes`). Whatever the endpoint sends that
cannot be decoded or read (not JSON, nested too deep, a broken gzip stream) is the endpoint's
error (`LLMError`), never the harness's.
"""

from __future__ import annotations

import contextvars
import email.utils
import hashlib
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpcore
import httpx

from pytest_super import redaction, safe_read, strictjson
from pytest_super.atomic import write_atomically
from pytest_super.errors import LLMError, LLMRefused

log = logging.getLogger(__name__)

#: USD per million tokens (prompt, completion), as of 2025-08 (OpenAI's public price list).
#: A model name matches the longest entry it starts with ("gpt-4o-2024-08-06" -> "gpt-4o").
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-2024-05-13": (5.00, 15.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
}
#: USD per million cached prompt tokens (`usage.prompt_tokens_details.cached_tokens`), same source;
#: models not listed here are charged the full prompt price for cached tokens.
CACHED_PRICES: dict[str, float] = {
    "gpt-4o": 1.25,
    "gpt-4o-mini": 0.075,
    "gpt-4.1": 0.50,
    "gpt-4.1-mini": 0.10,
    "gpt-4.1-nano": 0.025,
    "gpt-5": 0.125,
    "gpt-5-mini": 0.025,
    "gpt-5-nano": 0.005,
    "o1": 7.50,
    "o1-mini": 0.55,
    "o3": 0.50,
    "o3-mini": 0.55,
    "o4-mini": 0.275,
}

#: The preflight request's prompt (a one-token answer; the test server knows it by this text).
PREFLIGHT_PROMPT = "pytest-super checks the endpoint before a run: reply with the word ok."
#: Seconds the preflight waits: a cold local server (vLLM, Ollama) loads its model on the first
#: request, which can take a minute; longer than that, the tasks would suffer too.
PREFLIGHT_TIMEOUT_S = 90.0

#: reasoning models take `max_completion_tokens` and reject temperature, top_p and stop
_REASONING = re.compile(r"^(o\d|gpt-5)")
_RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
_BACKOFF_BASE_S = 1.0
_BACKOFF_CAP_S = 60.0
_RETRY_AFTER_CAP_S = 300.0
#: The largest token count one reply may report: 100x the longest context window offered today
#: (10M tokens, Llama 4 Scout, 2025). Anything above is a broken endpoint, not a real count.
MAX_USAGE_TOKENS = 1_000_000_000
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*.]{3,})")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: the largest answer read, as `max_tokens` allows it: a token is at most a few characters, and a
#: character at most 6 bytes of JSON (`\uXXXX`), so 64 bytes a token bounds the reply text
#: generously; 256 KiB more hold the envelope (ids, usage, logprobs, an error message). With the
#: default 1500 tokens: 352 KiB. A 100 MB answer (or a gzip bomb inflating to 1 GiB) is cut there,
#: counted after decompression, while it is read.
REPLY_BYTES_PER_TOKEN = 64
REPLY_ENVELOPE_BYTES = 256 * 1024
#: the largest cache entry read (an entry holds one reply's text and its token counts)
MAX_CACHE_ENTRY_BYTES = 16 * 1024 * 1024
#: where the base URL is set, for messages
BASE_URL_SETTING = "--super-base-url (or SUPER_BASE_URL, OPENAI_BASE_URL)"


def max_reply_bytes(settings: LLMSettings) -> int:
    """The most bytes (decompressed) of one answer the client reads before calling it an error."""
    return REPLY_ENVELOPE_BYTES + REPLY_BYTES_PER_TOKEN * settings.max_tokens


class ReplyTooLarge(Exception):
    """An answer past `max_reply_bytes`: the endpoint's fault, retried like a malformed one."""


@dataclass(frozen=True)
class LLMSettings:
    """Which model to ask, where, and how."""

    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key: str | None = field(default=None, repr=False)  # never printed
    temperature: float = 0.2
    top_p: float = 0.5
    max_tokens: int = 1500
    price_in: float | None = None  # USD per million prompt tokens; None: from PRICES, else 0
    price_out: float | None = None
    price_cached: float | None = None  # USD per million cached prompt tokens; None: table/price_in
    cache_dir: str | None = None  # --super-llm-cache
    max_retries: int = 6
    timeout_s: float = 300.0  # total deadline of one HTTP request, from connect to last byte

    def __post_init__(self) -> None:
        # settings that hold secrets make them the run's secrets, in every process that has them
        redaction.register(self.api_key)
        redaction.register_url(self.base_url)


def chat_url(base_url: str) -> httpx.URL:
    """The `/chat/completions` URL of a base URL: the path extended, a query string kept
    (`https://host/v1?token=t` -> `https://host/v1/chat/completions?token=t`). httpx.InvalidURL
    if it does not parse."""
    url = httpx.URL(base_url.strip())
    return url.copy_with(path=url.path.rstrip("/") + "/chat/completions")


def base_url_problem(base_url: str) -> str | None:
    """Why `base_url` cannot be an endpoint's URL (a usage error naming the setting and the URL,
    its secrets masked); None when it can."""
    why = None
    if base_url != base_url.strip() or any(ord(c) < 32 or c == "\x7f" for c in base_url):
        why = "it holds blanks or control characters"
    else:
        try:
            url = chat_url(base_url)
            port = url.port
        except (httpx.InvalidURL, ValueError, TypeError) as exc:
            why = f"it does not parse ({redaction.redact(str(exc))})"
        else:
            if url.scheme not in ("http", "https"):
                why = "it must start with http:// or https://"
            elif not url.host:
                why = "it names no host"
            elif port is not None and not 0 < port < 65536:
                why = f"port {port} is not in 1-65535"
    if why is None:
        return None
    return (
        f"{BASE_URL_SETTING}: the base URL {redaction.masked_url(base_url)!r} is not a valid "
        f"endpoint URL: {why}. Give the URL up to where `/chat/completions` is served, e.g. "
        "https://api.openai.com/v1 or http://127.0.0.1:8000/v1"
    )


#: the monotonic time by which the current request must be done (None: no request under way)
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "pytest_super_llm_deadline", default=None
)


def _time_left(timeout: float | None, error: type[Exception]) -> float | None:
    """`timeout` of one socket operation, cut to what is left of the request's total deadline;
    `error` when nothing is left."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the request's total deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by the request's total deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, each operation bounded by the request's total deadline: httpx's
    timeouts bound each read, and headers arriving a byte a second never time out by them."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        stream = self._backend.connect_tcp(host, port, left, local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, left, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _http_client(headers: dict[str, str], timeout: float) -> httpx.Client:
    """An httpx client whose connections (direct or through an environment's proxy) run on
    `_DeadlineBackend`."""
    client = httpx.Client(headers=headers, timeout=timeout)
    backend = _DeadlineBackend()
    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        if pool is not None and hasattr(pool, "_network_backend"):
            pool._network_backend = backend
    return client


def api_key_from_env() -> str | None:
    """The API key from SUPER_API_KEY, else OPENAI_API_KEY; None when neither is set."""
    return os.environ.get("SUPER_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


@dataclass(frozen=True)
class Completion:
    """One model reply with its usage. A cache hit has `cached=True` and costs nothing."""

    text: str
    prompt_tokens: int  # all of them, cached ones included (as the API counts them)
    completion_tokens: int
    cost_usd: float
    cached: bool = False
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the provider served from its cache


def _price_key(model: str) -> str | None:
    """The price-table entry of a model: the longest key its name starts with
    ("gpt-4o-2024-08-06" -> "gpt-4o"); None when none does."""
    name = model.rsplit("/", 1)[-1].lower()
    matches = [key for key in PRICES if name.startswith(key)]
    return max(matches, key=len) if matches else None


def model_prices(settings: LLMSettings) -> tuple[float, float]:
    """(USD per million prompt tokens, per million completion tokens) for the settings' model."""
    key = _price_key(settings.model)
    table = PRICES[key] if key else (0.0, 0.0)
    price_in = table[0] if settings.price_in is None else settings.price_in
    price_out = table[1] if settings.price_out is None else settings.price_out
    return price_in, price_out


def cached_prompt_price(settings: LLMSettings) -> float:
    """USD per million cached prompt tokens: --super-price's third value; else the table's
    cached rate for the model when its prompt price is the table's; else the prompt price."""
    if settings.price_cached is not None:
        return settings.price_cached
    key = _price_key(settings.model)
    if settings.price_in is None and key in CACHED_PRICES:
        return CACHED_PRICES[key]
    return model_prices(settings)[0]


def completion_cost(
    settings: LLMSettings, prompt_tokens: int, cached_tokens: int, completion_tokens: int
) -> float:
    """USD for one call: uncached prompt tokens at the prompt price, cached ones at the cached
    price, completion tokens at the completion price."""
    price_in, price_out = model_prices(settings)
    cached = min(cached_tokens, prompt_tokens)
    return (
        (prompt_tokens - cached) * price_in
        + cached * cached_prompt_price(settings)
        + completion_tokens * price_out
    ) / 1_000_000


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
    401, 403, 404 and other 4xx answers raise `LLMRefused` (an `LLMError`) at once.

    With `cache_dir`, replies are stored under the SHA-256 of the request body (model, messages,
    sampling, stop; never the key). A cache hit returns the stored reply with the same token counts,
    so token budgets replay identically, but with cost 0 (no money was spent).
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
        headers = {"Content-Type": "application/json"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._http = _http_client(headers, settings.timeout_s)
        self._cache = Path(settings.cache_dir) if settings.cache_dir else None

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
        s = self.settings
        body = self.request_body([{"role": "user", "content": PREFLIGHT_PROMPT}])
        body["max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"] = 1
        where = self._where()
        limit = min(PREFLIGHT_TIMEOUT_S, s.timeout_s)
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
                f"{self._scrub(str(exc))}. Check --super-base-url and the network.",
                reached=False,
            )
        except (httpx.RequestError, ReplyTooLarge) as exc:  # reached, but the answer is broken
            return PreflightProblem(
                f"LLM endpoint {where} answered a one-token request with an answer that cannot "
                f"be read: {type(exc).__name__}: {self._scrub(str(exc))}. Check that the base "
                "URL serves OpenAI's chat-completions protocol.",
                reached=True,
            )
        code = response.status_code
        if code == 200 or code in _RETRY_STATUSES:
            return None
        return PreflightProblem(self._refusal(response, where), reached=True)

    # -- the call ------------------------------------------------------------------------------
    def complete(
        self, messages: list[dict[str, str]], *, stop: list[str] | None = None
    ) -> Completion:
        """Ask the model for one reply to `messages` (stop strings are not part of the reply)."""
        if self._url_problem:
            raise LLMRefused(self._url_problem)
        body = self.request_body(messages, stop=stop)
        cache_file = self._cache_file(body)
        data = _read_cache_entry(cache_file) if cache_file is not None else None
        if data is not None:
            try:
                text, prompt_tokens, completion_tokens, cached = self._read_reply(data, body)
            except LLMError:
                log.warning("ignoring unreadable LLM cache file %s", cache_file)
            else:
                return Completion(
                    text, prompt_tokens, completion_tokens, 0.0, True, cached_prompt_tokens=cached
                )
        data = self._post(body)
        text, prompt_tokens, completion_tokens, cached = self._read_reply(data, body)
        if cache_file is not None:
            _write_cache_entry(cache_file, text, prompt_tokens, completion_tokens, cached)
        cost = completion_cost(self.settings, prompt_tokens, cached, completion_tokens)
        return Completion(text, prompt_tokens, completion_tokens, cost, cached_prompt_tokens=cached)

    def request_body(
        self, messages: list[dict[str, str]], *, stop: list[str] | None = None
    ) -> dict[str, Any]:
        """The JSON body sent for `messages` (also what the cache key is computed from)."""
        s = self.settings
        body: dict[str, Any] = {"model": s.model, "messages": messages}
        if _REASONING.match(s.model.rsplit("/", 1)[-1].lower()):
            body["max_completion_tokens"] = s.max_tokens
        else:
            body.update(temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens)
            if stop:
                body["stop"] = list(stop)
        return body

    def _cache_file(self, body: dict[str, Any]) -> Path | None:
        if self._cache is None:
            return None
        canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        return self._cache / digest[:2] / f"{digest}.json"

    def _where(self) -> str:
        return f"{self._shown_url} (model {self.settings.model!r})"

    def _post(self, body: dict[str, Any]) -> Any:
        s = self.settings
        where = self._where()
        failure = ""
        for attempt in range(s.max_retries + 1):
            wait: float | None = None
            try:
                response = self._post_once(body)
            except httpx.TransportError as exc:  # connection refused/reset, timeouts
                kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
                failure = f"the request {kind}: {type(exc).__name__}: {self._scrub(str(exc))}"
            except httpx.RequestError as exc:  # a body that does not decode (broken gzip)
                failure = f"the answer cannot be decoded: {type(exc).__name__}: {exc}"
                failure = self._scrub(failure)
            except ReplyTooLarge as exc:
                failure = str(exc)
            else:
                if response.status_code == 200:
                    try:
                        return _decode_json(response.content)
                    except Exception as exc:  # noqa: BLE001 - whatever the endpoint sent
                        failure = f"the answer is not JSON we can read ({type(exc).__name__}): "
                        failure += repr(
                            self._scrub(response.content[:300].decode("utf-8", "replace"))
                        )
                elif response.status_code in _RETRY_STATUSES:
                    failure = f"HTTP {response.status_code}: {self._server_message(response)}"
                    wait = _retry_after(response.headers.get("retry-after"))
                else:
                    raise LLMRefused(self._refusal(response, where))
            if attempt == s.max_retries:
                break
            if wait is None:
                wait = random.uniform(0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempt))
            log.warning(
                "LLM call to %s: %s; retry %d/%d in %.1f s",
                where,
                failure,
                attempt + 1,
                s.max_retries,
                wait,
            )
            self._sleep(wait)
        raise LLMError(
            f"LLM endpoint {where} failed after {s.max_retries + 1} tries; last: {failure}. "
            "Check that the endpoint is up and the base URL is right, or allow more retries."
        )

    def _post_once(self, body: dict[str, Any], limit: float | None = None) -> httpx.Response:
        """One POST within a total deadline of `limit` (default `timeout_s`) from connect to
        last byte, however slowly the headers or the body trickle in; the answer read up to
        `max_reply_bytes` (decompressed).

        httpx's timeouts bound each read, not the whole answer: a server sending a byte a second
        would never time out. Every socket operation of the request (connect, TLS, each write and
        read, the headers' too) is bounded by the time left (`_DeadlineBackend`), and the
        deadline is checked again after each chunk of the body.
        """
        limit = self.settings.timeout_s if limit is None else limit
        deadline = time.monotonic() + limit
        token = _DEADLINE.set(deadline)
        try:
            return self._send_bounded(body, limit, deadline)
        except httpx.TimeoutException as exc:  # every socket timeout is the total deadline's
            raise type(exc)(
                f"no complete answer within the total deadline of {limit:g} s ({exc})"
            ) from exc
        finally:
            _DEADLINE.reset(token)

    def _send_bounded(self, body: dict[str, Any], limit: float, deadline: float) -> httpx.Response:
        request = self._http.build_request("POST", self._url, json=body, timeout=limit)
        response = self._http.send(request, stream=True)
        bound = max_reply_bytes(self.settings)
        try:
            chunks = []
            size = 0
            for chunk in response.iter_bytes():  # decompressed, a chunk at a time
                size += len(chunk)
                if size > bound:
                    raise ReplyTooLarge(
                        f"the answer is larger than {bound:,} bytes (max_tokens "
                        f"{self.settings.max_tokens} x {REPLY_BYTES_PER_TOKEN} + "
                        f"{REPLY_ENVELOPE_BYTES:,}): not read further"
                    )
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the body was still arriving", request=request)
        finally:
            response.close()
        headers = [
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(
            response.status_code, headers=headers, content=b"".join(chunks), request=request
        )

    def _refusal(self, response: httpx.Response, where: str) -> str:
        code = response.status_code
        detail = self._server_message(response)
        if code == 401:
            hint = (
                "the endpoint refused the API key: set a valid key in SUPER_API_KEY "
                "(or OPENAI_API_KEY)"
                if self.settings.api_key
                else "the endpoint needs an API key: set SUPER_API_KEY (or OPENAI_API_KEY)"
            )
        elif code == 403:
            hint = "the key has no access to this model or endpoint; check the key's permissions"
        elif code == 404:
            hint = (
                "unknown model or wrong base URL: check the model name and that the base URL "
                "ends where `/chat/completions` is served (e.g. https://api.openai.com/v1)"
            )
        else:
            hint = "the endpoint rejected the request; check the model name and sampling options"
        return f"LLM endpoint {where}: HTTP {code}: {hint}. Server said: {detail}"

    def _server_message(self, response: httpx.Response) -> str:
        """The message of an error answer: `error.message` of its JSON, else its text (the first
        500 characters; a body nested too deep to decode or print is shown as text)."""
        try:
            data = _decode_json(response.content)
            error = data.get("error") if isinstance(data, dict) else None
            text = error.get("message") if isinstance(error, dict) else (error or data)
            text = text if isinstance(text, str) else _shown_json(text)
        except Exception:  # noqa: BLE001 - whatever the endpoint sent
            text = response.content[:2000].decode("utf-8", "replace")
        return self._scrub(text.strip()[:500]) or "(no message)"

    def _scrub(self, text: str) -> str:
        """Remove the run's secrets (the API key, the base URL's credentials and query values)
        and anything that looks like a key from a text."""
        key = self.settings.api_key
        if key:
            text = text.replace(key, "<API key>")
        return _KEYLIKE.sub("<API key>", redaction.redact(text))

    def _read_reply(self, data: Any, body: dict[str, Any]) -> tuple[str, int, int, int]:
        """(text, prompt, completion and cached prompt tokens) of a reply; `LLMError` for a reply
        we cannot read, whatever the reason (a shape we do not know, nesting too deep to walk)."""
        try:
            return self._reply_parts(data, body)
        except LLMError:
            raise
        except Exception as exc:  # noqa: BLE001 - the reply is the endpoint's: so is the fault
            raise LLMError(
                f"LLM endpoint {self._shown_url} answered with a reply that cannot be read "
                f"({type(exc).__name__}); check that the base URL serves OpenAI's "
                "chat-completions protocol"
            ) from None

    def _reply_parts(self, data: Any, body: dict[str, Any]) -> tuple[str, int, int, int]:
        """(text, prompt, completion and cached prompt tokens) of a reply; `LLMError` for a shape we cannot read.

        `content` may be a string, null (a reply of tool calls only) or a list of parts
        (`{"type": "text", "text": ...}`, OpenAI's newer format); text parts are joined and
        other parts (images, refusals) are left out.
        """
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise self._bad_reply("answered without choices[0].message", data) from None
        if not isinstance(message, dict):
            raise self._bad_reply("answered with a choices[0].message that is not an object", data)
        text = _content_text(message.get("content"))
        if text is None:
            raise self._bad_reply(
                "answered with a choices[0].message.content that is neither text nor a list "
                "of text parts",
                data,
            )
        # an endpoint that echoes its input may send our key back; JSON may carry lone
        # surrogates (`"\ud800"`), which no file or terminal can encode: U+FFFD stands for them
        text = _LONE_SURROGATE.sub("\ufffd", redaction.redact(text))
        prompt_tokens, completion_tokens, cached_tokens = self._usage(data.get("usage"))
        if prompt_tokens is None:  # some local servers omit usage: estimate (4 characters a token)
            prompt_tokens = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4
        if completion_tokens is None:
            completion_tokens = len(text) // 4
        return text, prompt_tokens, completion_tokens, cached_tokens

    def _usage(self, usage: Any) -> tuple[int | None, int | None, int]:
        """(prompt, completion, cached prompt) token counts of a reply's `usage`; None where it
        gives none (0 for cached: `usage.prompt_tokens_details.cached_tokens`).

        Counts must be integers in [0, MAX_USAGE_TOKENS]: a negative count would defeat the token
        budget, a huge one broke xdist's report serialization and lost the run's results.
        """
        if usage is None:
            return None, None, 0
        if not isinstance(usage, dict):
            raise LLMError(
                f"LLM endpoint {self._shown_url} answered with a `usage` that is not an object: "
                f"{self._scrub(_shown_json(usage)[:200])}"
            )
        details = usage.get("prompt_tokens_details")
        counts = []
        for name, value in (
            ("prompt_tokens", usage.get("prompt_tokens")),
            ("completion_tokens", usage.get("completion_tokens")),
            (
                "prompt_tokens_details.cached_tokens",
                details.get("cached_tokens") if isinstance(details, dict) else None,
            ),
        ):
            if value is not None and (type(value) is not int or not 0 <= value <= MAX_USAGE_TOKENS):
                raise LLMError(
                    f"LLM endpoint {self._shown_url} reported usage.{name} = "
                    f"{self._scrub(_shown_json(value)[:100])}; token counts must be whole numbers from "
                    f"0 to {MAX_USAGE_TOKENS:,}. Check the endpoint (or its proxy)."
                )
            counts.append(value)
        return counts[0], counts[1], counts[2] or 0

    def _bad_reply(self, what: str, data: Any) -> LLMError:
        shown = self._scrub(_shown_json(data)[:300])
        return LLMError(
            f"LLM endpoint {self._shown_url} {what}: {shown}; check that the base URL serves "
            "OpenAI's chat-completions protocol"
        )


def _decode_json(content: bytes) -> Any:
    """An answer's JSON, nested at most `safe_read.MAX_DEPTH` deep (checked before it is parsed);
    `ForeignDataError` if it is none."""
    return safe_read.loads(content, "the answer")


def _shown_json(value: Any) -> str:
    """`value` as JSON for a message; a value too deep to encode is named, not encoded."""
    try:
        return json.dumps(value, default=str)
    except (RecursionError, ValueError, TypeError):
        return f"(a {type(value).__name__} nested too deep to show)"


def _read_cache_entry(path: Path) -> Any:
    """A cache entry's JSON; None when there is none or it cannot be read (not a regular file,
    larger than MAX_CACHE_ENTRY_BYTES, not JSON, nested too deep): the model is asked again."""
    if not os.path.lexists(path):
        return None
    try:
        return safe_read.read_json_file(path, MAX_CACHE_ENTRY_BYTES)
    except Exception as exc:  # noqa: BLE001 - a bad entry is a cache miss
        log.warning("ignoring an unreadable LLM cache entry: %s", exc)
        return None


def _write_cache_entry(
    path: Path, text: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int
) -> None:
    """Store what a trajectory may hold of a reply (its text, redacted, and its token counts;
    not the raw answer), owner-only: 0700 folders, a 0600 file. A cache that cannot be written
    is warned about, not an error."""
    entry = {
        "choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        },
    }
    try:
        for folder in (path.parent.parent, path.parent):
            if not folder.is_dir():
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                folder.chmod(0o700)
        write_atomically(path, strictjson.dumps(entry), mode=0o600)
    except OSError as exc:
        log.warning("could not write the LLM cache file %s: %s", path, exc)


def _content_text(content: Any) -> str | None:
    """The text of a message's `content` (string, null or list of parts); None if unreadable."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif not isinstance(part, dict):
            return None
    return "".join(texts)


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date); None if absent."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(0.0, seconds), _RETRY_AFTER_CAP_S)
