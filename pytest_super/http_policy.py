"""One policy for every outbound HTTP call the harness makes: the model client (`llm`), `download
prompts` (`download`) and the Hugging Face Hub's client under `download`. Every request has a total
deadline from connect to last byte, its answer is read within a size cap, and redirects are
followed at most `MAX_REDIRECTS` times (only where a client follows them at all).

httpx's timeouts bound each socket operation, not the whole request: headers or a body that
trickle in a byte every few seconds never time out by them. Here every socket operation (connect,
TLS, each write and read, the headers' too) is bounded by what is left of the total deadline
(`_DeadlineBackend`, installed in every client `client` builds), and the deadline is checked
again after each chunk of the body (`send`). The deadline is a context variable (`deadline`):
a block under it (one request, or a whole library call such as `hf_hub_download` on a client of
ours) ends by it, whatever it sends.
"""

from __future__ import annotations

import contextlib
import contextvars
import ssl
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

#: the most redirects a client that follows them follows (httpx's own default is 20)
MAX_REDIRECTS = 5


class TooLarge(Exception):
    """An answer past its size cap, cut while it was read."""


class TooManyRedirects(Exception):
    """More than MAX_REDIRECTS redirects in a row, followed by a library on its own."""


class DeadlinePassed(TimeoutError):
    """A request (a library's retry) asked for once the total deadline passed, or an answer
    asking to wait past it (`Retry-After`): no HTTP client's error, so no library retries it."""


@dataclass
class _Bounds:
    """What the current block of requests may still take: until `ends` (monotonic), and at most
    `max_bytes` read from the network in all (None: no cap on the wire)."""

    ends: float
    limit: float
    max_bytes: int | None = None
    read: int = 0
    #: redirects answered in a row (a library that follows them itself)
    redirects: int = 0


#: the bounds of the current block of requests (None: no deadline)
_BOUNDS: contextvars.ContextVar[_Bounds | None] = contextvars.ContextVar(
    "pytest_super_http_bounds", default=None
)


def _time_left(timeout: float | None, error: type[Exception]) -> float | None:
    """`timeout` of one socket operation, cut to what is left of the total deadline; `error`
    when nothing is left."""
    bounds = _BOUNDS.get()
    if bounds is None:
        return timeout
    left = bounds.ends - time.monotonic()
    if left <= 0:
        raise error("the request's total deadline passed")
    return left if timeout is None else min(timeout, left)


def _count(size: int) -> None:
    """`size` more bytes read from the network: TooLarge past the block's cap on the wire."""
    bounds = _BOUNDS.get()
    if bounds is not None and bounds.max_bytes is not None:
        bounds.read += size
        if bounds.read > bounds.max_bytes:
            raise TooLarge(f"more than {bounds.max_bytes:,} bytes arrived: not read further")


@contextlib.contextmanager
def bounded(limit: float, *, max_bytes: int | None = None) -> Iterator[float]:
    """Every request of the block ends within `limit` seconds from now (an outer deadline that
    ends sooner still holds), and with `max_bytes`, the block reads at most that many bytes from
    the network (TooLarge past it). Yields the monotonic time the block ends. A timeout inside is
    re-raised as the same type naming the total deadline (httpx's, or the Hub's httpx2's)."""
    outer = _BOUNDS.get()
    ends = time.monotonic() + limit
    if outer is not None and outer.ends < ends:
        ends, limit = outer.ends, outer.limit
    token = _BOUNDS.set(_Bounds(ends, limit, max_bytes))
    try:
        yield ends
    except Exception as exc:
        if not _is_timeout(exc):
            raise
        raise type(exc)(
            f"no complete answer within the total deadline of {limit:g} s ({exc})"
        ) from exc
    finally:
        _BOUNDS.reset(token)


# `Any` below: these take objects of httpx or of httpx2 (the Hub's client) and of httpcore or
# httpcore2, two libraries with no common type; each is read only as its own API says


def refuse_past_deadline(request: Any) -> None:  # Any: httpx, httpcore
    """A client's request event hook: no request once the total deadline passed (a library
    that retries timeouts, sleeping between tries, would else go on past it)."""
    bounds = _BOUNDS.get()
    if bounds is not None and time.monotonic() >= bounds.ends:
        raise DeadlinePassed(
            f"the total deadline of {bounds.limit:g} s passed before {request.method} {request.url}"
        )


def check_answer(response: Any) -> None:  # Any: httpx, httpcore
    """A client's response event hook: an answer asking to wait (`Retry-After`, in seconds) past
    the total deadline ends the block now rather than after the wait; more than MAX_REDIRECTS
    redirects in a row (a library following them itself, past the client's own bound) end it."""
    bounds = _BOUNDS.get()
    if bounds is None:
        return
    wait = str(response.headers.get("retry-after") or "").strip()
    if wait.isdigit() and time.monotonic() + int(wait) >= bounds.ends:
        raise DeadlinePassed(
            f"HTTP {response.status_code} asks to wait {int(wait)} s, past the total deadline "
            f"of {bounds.limit:g} s"
        )
    bounds.redirects = bounds.redirects + 1 if 300 <= response.status_code < 400 else 0
    if bounds.redirects > MAX_REDIRECTS:
        raise TooManyRedirects(
            f"more than {MAX_REDIRECTS} redirects in a row, the last to "
            f"{response.headers.get('location', '?')!r}"
        )


#: the event hooks of a library's own client under the policy (the Hub's, which retries and
#: follows redirects itself)
EVENT_HOOKS: dict[str, list[Callable[[Any], None]]] = {  # Any: httpx, httpcore
    "request": [refuse_past_deadline],
    "response": [check_answer],
}


def _is_timeout(exc: Exception) -> bool:
    """A timeout of httpx, or of httpx2 (the Hub's client) when it is loaded."""
    httpx2 = sys.modules.get("httpx2")
    kinds = (httpx.TimeoutException, *([httpx2.TimeoutException] if httpx2 else []))
    return isinstance(exc, kinds)


class _DeadlineStream:
    """A connection whose every read and write ends by the total deadline (an httpcore or
    httpcore2 `NetworkStream`; `core` is that module, whose timeouts it raises)."""

    def __init__(self, stream: Any, core: Any) -> None:  # Any: httpx, httpcore
        self._stream, self._core = stream, core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._stream.read(max_bytes, _time_left(timeout, self._core.ReadTimeout))
        _count(len(data))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _time_left(timeout, self._core.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> _DeadlineStream:
        left = _time_left(timeout, self._core.ConnectTimeout)
        return _DeadlineStream(
            self._stream.start_tls(ssl_context, server_hostname, left), self._core
        )

    def get_extra_info(self, info: str) -> object:
        return self._stream.get_extra_info(info)


class _DeadlineBackend:
    """httpcore's (or httpcore2's) own sockets, each operation bounded by the total deadline."""

    def __init__(self, core: Any) -> None:  # Any: httpx, httpcore
        self._core = core
        self._backend = core.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: object = None,
    ) -> _DeadlineStream:
        left = _time_left(timeout, self._core.ConnectTimeout)
        stream = self._backend.connect_tcp(host, port, left, local_address, socket_options)
        return _DeadlineStream(stream, self._core)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: object = None
    ) -> _DeadlineStream:
        left = _time_left(timeout, self._core.ConnectTimeout)
        stream = self._backend.connect_unix_socket(path, left, socket_options)
        return _DeadlineStream(stream, self._core)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def client(
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
    follow_redirects: bool = False,
) -> httpx.Client:
    """An httpx client under the policy: its connections (direct or through an environment's
    proxy) on `_DeadlineBackend`, at most MAX_REDIRECTS redirects when it follows them."""
    made = httpx.Client(
        headers=headers,
        timeout=timeout,
        follow_redirects=follow_redirects,
        max_redirects=MAX_REDIRECTS,
    )
    install(made, httpcore)
    return made


def install(made: Any, core: Any) -> None:  # Any: httpx, httpcore
    """Put the client `made` (an `httpx.Client`, or the Hub's `httpx2.Client` with `core` its
    httpcore2) under the policy's deadline. The one place that reaches httpx's and httpcore's
    private attributes (checked against httpx 0.28.1 and httpcore 1.0.9, httpx2 and httpcore2
    2.16.2): the network backend of the client's default transport and of each proxy transport
    httpx mounted from the environment (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY).

    httpx has no public way to give its transports a network backend: `httpx.HTTPTransport`
    builds its `httpcore.ConnectionPool` itself, and building the proxy mounts ourselves would
    mean repeating httpx's reading of the environment's proxies (`_utils.get_environment_proxies`
    is private too) and its mapping of httpcore's errors. tests/attacks/test_endpoint.py holds the
    deadline through a direct connection and through an environment's proxy, and
    tests/attacks/test_attack_round5_output.py the Hub's client's: if these attributes move, those
    tests fail."""
    backend = _DeadlineBackend(core)
    for transport in [made._transport, *made._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        if pool is not None and hasattr(pool, "_network_backend"):
            pool._network_backend = backend


def send(
    made: httpx.Client,
    request: httpx.Request,
    *,
    limit: float,
    max_bytes: int,
    too_large: type[TooLarge] = TooLarge,
    why: str = "",
) -> httpx.Response:
    """`request` sent within a total deadline of `limit` seconds from connect to last byte
    (redirects included), however slowly the headers or the body trickle in; the answer read a
    chunk at a time up to `max_bytes` (decompressed; `too_large` past it, `why` saying where the
    cap comes from). Returned read, without the headers of its transfer encoding. A timeout is
    httpx's `TimeoutException` naming the deadline."""
    with bounded(limit) as ends:
        response = made.send(request, stream=True)
        try:
            chunks = []
            size = 0
            for chunk in response.iter_bytes():  # decompressed, a chunk at a time
                size += len(chunk)
                if size > max_bytes:
                    raise too_large(
                        f"the answer is larger than {max_bytes:,} bytes{why}: not read further"
                    )
                chunks.append(chunk)
                if time.monotonic() > ends:
                    raise httpx.ReadTimeout("the body was still arriving", request=request)
        finally:
            response.close()
    headers = [
        (name, value)
        for name, value in response.headers.multi_items()
        if name.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx.Response(
        response.status_code, headers=headers, content=b"".join(chunks), request=response.request
    )


def get(url: str, *, limit: float, max_bytes: int) -> httpx.Response:
    """One GET of `url` under the policy (redirects followed, at most MAX_REDIRECTS), by a client
    of its own: the answer read, whatever its status."""
    with client(timeout=limit, follow_redirects=True) as made:
        return send(made, made.build_request("GET", url), limit=limit, max_bytes=max_bytes)
