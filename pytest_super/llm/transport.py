"""The HTTP transport of the LLM client: an httpx client whose every request has a total
deadline from connect to last byte, and an answer read within its size cap.

httpx's timeouts bound each socket operation, not the whole request: headers or a body that
trickle in a byte a second never time out by them. Here every socket operation (connect, TLS,
each write and read, the headers' too) is bounded by what is left of the request's total
deadline (`_DeadlineBackend`), and the deadline is checked again after each chunk of the body.
The answer is read up to `max_reply_bytes`, counted after decompression (a gzip bomb is cut
while it inflates).
"""

from __future__ import annotations

import contextvars
import time
from typing import Any

import httpcore
import httpx

from pytest_super.llm.settings import LLMSettings

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


def http_client(headers: dict[str, str], timeout: float) -> httpx.Client:
    """An httpx client whose connections (direct or through an environment's proxy) run on
    `_DeadlineBackend`."""
    client = httpx.Client(headers=headers, timeout=timeout)
    _install_network_backend(client, _DeadlineBackend())
    return client


def _install_network_backend(client: httpx.Client, backend: httpcore.NetworkBackend) -> None:
    """The one place that reaches httpx's and httpcore's private attributes (checked against
    httpx 0.28.1 and httpcore 1.0.9): the network backend of the client's default transport and of
    each proxy transport httpx mounted from the environment (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY,
    NO_PROXY).

    httpx has no public way to give its transports a network backend: `httpx.HTTPTransport`
    builds its `httpcore.ConnectionPool` itself, and building the proxy mounts ourselves would
    mean repeating httpx's reading of the environment's proxies (`_utils.get_environment_proxies`
    is private too) and its mapping of httpcore's errors. tests/attacks/test_endpoint.py holds the
    deadline through a direct connection and through an environment's proxy: if these attributes
    move, those tests fail."""
    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        if pool is not None and hasattr(pool, "_network_backend"):
            pool._network_backend = backend


def post_once(
    client: httpx.Client, url: str, body: dict[str, Any], limit: float, settings: LLMSettings
) -> httpx.Response:
    """One POST within a total deadline of `limit` seconds from connect to last byte, however
    slowly the headers or the body trickle in; the answer read up to `max_reply_bytes(settings)`
    (decompressed, `ReplyTooLarge` past it). A timeout is httpx's `TimeoutException` naming the
    deadline."""
    deadline = time.monotonic() + limit
    token = _DEADLINE.set(deadline)
    try:
        return _send_bounded(client, url, body, (limit, deadline), settings)
    except httpx.TimeoutException as exc:  # every socket timeout is the total deadline's
        raise type(exc)(
            f"no complete answer within the total deadline of {limit:g} s ({exc})"
        ) from exc
    finally:
        _DEADLINE.reset(token)


def _send_bounded(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    limits: tuple[float, float],
    settings: LLMSettings,
) -> httpx.Response:
    """The POST, its body read a chunk at a time within the deadline and the reply cap; the
    answer returned read, without the headers of its transfer encoding."""
    limit, deadline = limits
    bound = max_reply_bytes(settings)
    request = client.build_request("POST", url, json=body, timeout=limit)
    response = client.send(request, stream=True)
    try:
        chunks = []
        size = 0
        for chunk in response.iter_bytes():  # decompressed, a chunk at a time
            size += len(chunk)
            if size > bound:
                raise ReplyTooLarge(
                    f"the answer is larger than {bound:,} bytes (max_tokens "
                    f"{settings.max_tokens} x {REPLY_BYTES_PER_TOKEN} + "
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
