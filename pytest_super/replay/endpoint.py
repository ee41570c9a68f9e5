"""The replay model endpoint: a real HTTP server on 127.0.0.1 speaking OpenAI's chat completions,
answering each request with the episode's next recorded reply.

`ReplayEndpoint` serves one episode at a time (`play(replies)`): each `POST /v1/chat/completions`
gets the next `Reply` as `choices[0].message.content`, cut at the request's first stop string as a
real endpoint cuts it, with the reply's planned usage (`prompt_tokens`, `completion_tokens`).
Our agent's own `LLMClient` talks to it, so the request, the JSON, the usage accounting and the
reply parsing are the ones a real run goes through. Every request's messages are kept
(`requests`), for the prompt check; the plugin's preflight request before a run is answered `ok`
apart from them. A request after the last recorded reply is answered
400 with a message saying so (the client does not retry it): the agent went on where the
episode had stopped.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pytest_super.llm import PREFLIGHT_PROMPT
from pytest_super.replay.script import Reply

#: the error message of a request the episode has no reply for
NO_MORE_REPLIES = "replay endpoint: the published episode recorded no further model reply"


def cut_at_stop(text: str, stops: Any) -> str:
    """`text` up to the first of the request's stop strings, as the API cuts a completion."""
    if isinstance(stops, str):
        stops = [stops]
    found = [text.find(s) for s in stops or [] if isinstance(s, str) and s and s in text]
    return text[: min(found)] if found else text


def completion_body(
    request: dict[str, Any], text: str, prompt: int, completion: int
) -> dict[str, Any]:
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

    def handle_error(self, request: Any, client_address: Any) -> None:
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

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the replay's output is its comparison, not an access log

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
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

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
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
        self.requests: list[list[dict[str, Any]]] = []
        self.served = 0
        super().__init__()

    def __enter__(self) -> ReplayEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def play(self, replies: list[Reply]) -> None:
        """Serve `replies` from now on (what was left of an earlier episode is dropped)."""
        with self._lock:
            self._replies = deque(replies)
            self.requests = []
            self.served = 0

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        if body.get("messages") == [{"role": "user", "content": PREFLIGHT_PROMPT}]:
            return 200, completion_body(body, "ok", 1, 1)  # the plugin's check, not a reply
        with self._lock:
            messages = body.get("messages")
            self.requests.append(messages if isinstance(messages, list) else [])
            reply = self._replies.popleft() if self._replies else None
            if reply is not None:
                self.served += 1
        if reply is None:
            return 400, {"error": {"message": NO_MORE_REPLIES, "type": "invalid_request_error"}}
        text = cut_at_stop(reply.text, body.get("stop"))
        return 200, completion_body(body, text, reply.prompt_tokens, reply.completion_tokens)
