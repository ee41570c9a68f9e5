"""Retries of a request: which failures are retried, how long to wait, and when to give up.

429, 408/409, 5xx, connection errors, timeouts (the total deadline's included), answers that
cannot be decoded and answers past the reply cap are retried with exponential backoff and full
jitter (honouring `Retry-After`), at most `max_retries` times, then `LLMError`. 401, 403, 404
and other 4xx answers raise `LLMRefused` (an `LLMError`) at once.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from pytest_super.errors import LLMError, LLMRefused
from pytest_super.llm.breaker import Breaker
from pytest_super.llm.replies import decode_json, refusal, scrub, server_message
from pytest_super.llm.transport import ReplyTooLarge
from pytest_super.strictjson import JSON

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
_BACKOFF_BASE_S = 1.0
_BACKOFF_CAP_S = 60.0
_RETRY_AFTER_CAP_S = 300.0


@dataclass(frozen=True)
class Endpoint:
    """What the retry loop needs of the client: how to send once, how to name the endpoint and
    model in messages (`where`), the key to scrub, how many retries and how to wait."""

    send: Callable[[], httpx.Response]
    where: str
    api_key: str | None
    max_retries: int
    sleep: Callable[[float], None]
    breaker: Breaker | None = None  # the run's circuit breaker on this endpoint


@dataclass(frozen=True)
class _Try:
    """One try's outcome: the decoded answer (`done`), else why it failed and the wait the
    server asked for (None: backoff)."""

    done: bool
    data: JSON = None
    failure: str = ""
    wait: float | None = None
    no_answer: bool = False  # no answer or a server fault: what the circuit breaker counts


def post_with_retries(endpoint: Endpoint) -> JSON:
    """The decoded JSON of the first 200 answer; `LLMRefused` for a refusal, `LLMError` once
    every try failed."""
    failure = ""
    breaker = endpoint.breaker
    for attempt in range(endpoint.max_retries + 1):
        if breaker is not None:
            breaker.raise_if_down()
        outcome = _try_once(endpoint)
        if breaker is not None and outcome.no_answer:
            breaker.failed()
        elif breaker is not None:
            breaker.succeeded()
        if outcome.done:
            return outcome.data
        failure = outcome.failure
        if attempt == endpoint.max_retries:
            break
        wait = outcome.wait if outcome.wait is not None else backoff(attempt)
        log.warning(
            "LLM call to %s: %s; retry %d/%d in %.1f s",
            endpoint.where,
            failure,
            attempt + 1,
            endpoint.max_retries,
            wait,
        )
        if breaker is not None:
            breaker.sleep(wait, endpoint.sleep)
        else:
            endpoint.sleep(wait)
    raise LLMError(
        f"LLM endpoint {endpoint.where} failed after {endpoint.max_retries + 1} tries; last: "
        f"{failure}. Check that the endpoint is up and the base URL is right, or allow more "
        "retries."
    )


def _try_once(endpoint: Endpoint) -> _Try:
    """Send once and sort the outcome: done, a failure to retry, or `LLMRefused`."""
    key = endpoint.api_key
    try:
        response = endpoint.send()
    except httpx.TransportError as exc:  # connection refused/reset, timeouts
        kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
        failure = f"the request {kind}: {type(exc).__name__}: {scrub(str(exc), key)}"
        return _Try(False, failure=failure, no_answer=True)
    except httpx.RequestError as exc:  # a body that does not decode (broken gzip)
        failure = f"the answer cannot be decoded: {type(exc).__name__}: {exc}"
        return _Try(False, failure=scrub(failure, key))
    except ReplyTooLarge as exc:
        return _Try(False, failure=str(exc))
    if response.status_code == 200:
        try:
            return _Try(True, data=decode_json(response.content))
        except Exception as exc:  # noqa: BLE001 - whatever the endpoint sent
            shown = scrub(response.content[:300].decode("utf-8", "replace"), key)
            failure = f"the answer is not JSON we can read ({type(exc).__name__}): {shown!r}"
            return _Try(False, failure=failure)
    if response.status_code in RETRY_STATUSES:
        failure = f"HTTP {response.status_code}: {server_message(response, key)}"
        wait = retry_after(response.headers.get("retry-after"))
        return _Try(False, failure=failure, wait=wait, no_answer=response.status_code >= 500)
    raise LLMRefused(refusal(response, endpoint.where, key))


def backoff(attempt: int) -> float:
    """Seconds to wait before retry `attempt + 1`: full jitter over an exponential cap."""
    return random.uniform(0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempt))


def retry_after(value: str | None) -> float | None:
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
