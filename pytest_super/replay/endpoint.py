"""The replay model endpoint: a real HTTP server on 127.0.0.1 speaking OpenAI's chat completions,
answering each request with the episode's next recorded reply.

`ReplayEndpoint` serves one episode at a time (`play(replies)`): each `POST /v1/chat/completions`
gets the next `Reply` as `choices[0].message.content`, cut at the request's first stop string as a
real endpoint cuts it, with the reply's planned usage (`prompt_tokens`, `completion_tokens`).
Our agent's own `LLMClient` talks to it, so the request, the JSON, the usage accounting and the
reply parsing are the ones a real run goes through. Every request is kept: its messages
(`requests`) and the whole request as the reference's agent sends one (`sent`: messages, stop,
temperature, top_p, max_tokens); the plugin's preflight request before a run is answered `ok`
apart from them. A request after the last recorded reply is answered
400 with a message saying so (the client does not retry it): the agent went on where the
episode had stopped.

Given the reference agent's requests of the episode (`play(replies, expected=...)`, from
`expected.read_expected`), each request is compared with the reference's at the same turn
before it is answered. The first one that differs is kept (`difference`) and answered 400 with
it, as is every request after it: the episode ends at the divergence instead of consuming the
recorded replies. So does a request after the episode parted from the recording otherwise
(`play(..., diverged=...)`: the replay kernel was asked what the episode did not record).
"""

from __future__ import annotations

import json
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import socket
from typing import Any

from pytest_super.llm import PREFLIGHT_PROMPT
from pytest_super.replay.expected import (
    PARAMETERS,
    Request,
    RequestDifference,
    request_difference,
)
from pytest_super.replay.script import Reply

#: the error message of a request the episode has no reply for
NO_MORE_REPLIES = "replay endpoint: the published episode recorded no further model reply"
#: the start of the error message of a request after the episode parted from the recording
EPISODE_DIVERGED = "replay endpoint: the episode has parted from the recording"
#: the start of the error message of a request that differs from the reference's
DIVERGED = "replay endpoint: the request differs from the reference agent's"


def cut_at_stop(text: str, stops: Any) -> str:  # Any: json.loads (a request's `stop`, on trust)
    """`text` up to the first of the request's stop strings, as the API cuts a completion."""
    if isinstance(stops, str):
        stops = [stops]
    found = [text.find(s) for s in stops or [] if isinstance(s, str) and s and s in text]
    return text[: min(found)] if found else text


def completion_body(
    request: Mapping[str, object], text: str, prompt: int, completion: int
) -> dict[str, object]:
    """An OpenAI chat completion answering `request` with `text` and the usage given."""
    return {
        "id": "chatcmpl-replay",
        "object": "chat.completion",
        "model": request.get("model", "replay"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


class _QuietServer(ThreadingHTTPServer):
    """A client gone mid-answer (our agent's process interrupted) is no error to print."""

    def handle_error(self, request: socket | tuple[bytes, socket], client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipe, ConnectionReset
            super().handle_error(request, client_address)


class ChatServer:
    """An OpenAI-compatible endpoint on 127.0.0.1 (a free port) in a background thread; a
    subclass answers each parsed request body with `answer(body) -> (status, JSON payload)`."""

    def __init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and
            # the client's delayed ACK hold the body back 40 ms per request
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: object) -> None:
                pass  # the replay's output is its comparison, not an access log

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                payload: object
                if self.path.rstrip("/") != "/v1/chat/completions" or not isinstance(body, dict):
                    code, payload = 404, {"error": {"message": f"no route {self.path}"}}
                else:
                    code, payload = server.answer(body)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def answer(self, body: dict[str, object]) -> tuple[int, object]:
        raise NotImplementedError

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class ReplayEndpoint(ChatServer):
    """Answers with one episode's recorded replies, in order (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self.requests: list[list[object]] = []  # each request's messages
        self.sent: list[Request] = []
        self.expected: list[Request] | None = None
        self.difference: RequestDifference | None = None
        self._diverged: Callable[[], str | None] | None = None
        self.parted: str | None = None  # why a request was refused after the episode parted
        self.served = 0
        super().__init__()

    def __enter__(self) -> ReplayEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def play(
        self,
        replies: list[Reply],
        expected: list[Request] | None = None,
        diverged: Callable[[], str | None] | None = None,
    ) -> None:
        """Serve `replies` from now on (what was left of an earlier episode is dropped);
        `expected`: the reference agent's requests of the episode, to compare each request with;
        `diverged`: says how the episode has already parted from the recording (None: it has
        not), checked before each reply: once it has, no more replies are served."""
        with self._lock:
            self._diverged = diverged
            self.parted = None
            self._replies = deque(replies)
            self.requests = []
            self.sent = []
            self.expected = expected
            self.difference = None
            self.served = 0

    def answer(self, body: dict[str, object]) -> tuple[int, object]:
        if body.get("messages") == [{"role": "user", "content": PREFLIGHT_PROMPT}]:
            return 200, completion_body(body, "ok", 1, 1)  # the plugin's check, not a reply
        with self._lock:
            messages = body.get("messages")
            self.requests.append(messages if isinstance(messages, list) else [])
            sent = {"messages": self.requests[-1], **{k: body.get(k) for k in PARAMETERS}}
            self.sent.append(sent)
            if self.difference is None:
                self.difference = self._compare(len(self.sent), sent)
            if self.difference is not None:
                message = f"{DIVERGED}: {self.difference.line()}"
                return 400, {"error": {"message": message, "type": "invalid_request_error"}}
            parted = self._diverged() if self._diverged is not None else None
            if parted is not None:
                self.parted = parted
                message = f"{EPISODE_DIVERGED}: {parted}"
                return 400, {"error": {"message": message, "type": "invalid_request_error"}}
            reply = self._replies.popleft() if self._replies else None
            if reply is not None:
                self.served += 1
        if reply is None:
            return 400, {"error": {"message": NO_MORE_REPLIES, "type": "invalid_request_error"}}
        text = cut_at_stop(reply.text, body.get("stop"))
        return 200, completion_body(body, text, reply.prompt_tokens, reply.completion_tokens)

    def _compare(self, turn: int, sent: Request) -> RequestDifference | None:
        if self.expected is None:
            return None
        if turn > len(self.expected):
            shown = f"the reference sent {len(self.expected)}"
            return RequestDifference(turn, "an extra request", ours="a request", expected=shown)
        return request_difference(turn, sent, self.expected[turn - 1])
