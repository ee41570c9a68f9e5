"""The LLM client: one OpenAI-compatible `/chat/completions` endpoint, over httpx.

Owns: `LLMSettings` (model, endpoint, sampling, prices, cache), `api_key_from_env`, `Completion`,
`LLMClient` (retries with backoff, clear errors, usage and cost, an on-disk response cache) and the
built-in price table.

The API key is sent only in the `Authorization` header. It never appears in an exception message,
a log line, a repr or a cache file: error texts that come back from the server are scrubbed of it.
"""

from __future__ import annotations

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

import httpx

from pytest_super import redaction
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
    """Why the preflight request failed: refused (`reached`) or no answer at all."""

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
        self._url = settings.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
            redaction.register(settings.api_key)
        self._http = httpx.Client(headers=headers, timeout=settings.timeout_s)
        self._cache = Path(settings.cache_dir) if settings.cache_dir else None

    def __repr__(self) -> str:
        return f"LLMClient(model={self.settings.model!r}, base_url={self.settings.base_url!r})"

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
        own retries deal with), else the problem: the endpoint refused the request (401, 403,
        404 and other 4xx but 408/409/429) or could not be reached.
        """
        s = self.settings
        body = self.request_body([{"role": "user", "content": PREFLIGHT_PROMPT}])
        body["max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"] = 1
        where = f"{self._url} (model {s.model!r})"
        try:
            response = self._http.post(self._url, json=body, timeout=PREFLIGHT_TIMEOUT_S)
        except httpx.TransportError as exc:
            return PreflightProblem(
                f"LLM endpoint {where} cannot be reached: {type(exc).__name__}: "
                f"{self._scrub(str(exc))}. Check --super-base-url and the network.",
                reached=False,
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
        body = self.request_body(messages, stop=stop)
        cache_file = self._cache_file(body)
        if cache_file is not None and cache_file.exists():
            try:
                data = json.loads(cache_file.read_text())
            except ValueError:
                log.warning("ignoring unreadable LLM cache file %s", cache_file)
            else:
                text, prompt_tokens, completion_tokens, cached = self._read_reply(data, body)
                return Completion(
                    text, prompt_tokens, completion_tokens, 0.0, True, cached_prompt_tokens=cached
                )
        data = self._post(body)
        text, prompt_tokens, completion_tokens, cached = self._read_reply(data, body)
        if cache_file is not None:
            write_atomically(cache_file, json.dumps(data))
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

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        s = self.settings
        where = f"{self._url} (model {s.model!r})"
        failure = ""
        for attempt in range(s.max_retries + 1):
            wait: float | None = None
            try:
                response = self._post_once(body)
            except httpx.TransportError as exc:  # connection refused/reset, timeouts
                kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
                failure = f"the request {kind}: {type(exc).__name__}: {self._scrub(str(exc))}"
            except ReplyTooLarge as exc:
                failure = str(exc)
            else:
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError:
                        failure = f"the answer is not JSON: {self._scrub(response.text[:300])!r}"
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

    def _post_once(self, body: dict[str, Any]) -> httpx.Response:
        """One POST within a total deadline of `timeout_s`, however slowly the answer trickles in.

        httpx's timeouts bound each read, not the whole answer: a server sending a byte a second
        would never time out. The body is read chunk by chunk and the deadline checked after
        each; a single read is bounded by the time left when the request started.
        """
        limit = self.settings.timeout_s
        deadline = time.monotonic() + limit
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
                    raise httpx.ReadTimeout(
                        f"no complete answer within the total deadline of {limit:g} s",
                        request=request,
                    )
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
        try:
            data = response.json()
            error = data.get("error") if isinstance(data, dict) else None
            text = error.get("message") if isinstance(error, dict) else (error or data)
            text = str(text)
        except ValueError:
            text = response.text
        return self._scrub(text.strip()[:500]) or "(no message)"

    def _scrub(self, text: str) -> str:
        """Remove the API key (and anything that looks like a key) from a text."""
        key = self.settings.api_key
        if key:
            text = text.replace(key, "<API key>")
        return _KEYLIKE.sub("<API key>", text)

    def _read_reply(self, data: Any, body: dict[str, Any]) -> tuple[str, int, int, int]:
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
                f"LLM endpoint {self._url} answered with a `usage` that is not an object: "
                f"{self._scrub(repr(usage)[:200])}"
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
                    f"LLM endpoint {self._url} reported usage.{name} = "
                    f"{self._scrub(repr(value)[:100])}; token counts must be whole numbers from "
                    f"0 to {MAX_USAGE_TOKENS:,}. Check the endpoint (or its proxy)."
                )
            counts.append(value)
        return counts[0], counts[1], counts[2] or 0

    def _bad_reply(self, what: str, data: Any) -> LLMError:
        shown = self._scrub(json.dumps(data, default=str)[:300])
        return LLMError(
            f"LLM endpoint {self._url} {what}: {shown}; check that the base URL serves "
            "OpenAI's chat-completions protocol"
        )


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
