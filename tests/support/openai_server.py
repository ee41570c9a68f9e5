"""A real HTTP server on 127.0.0.1 that speaks OpenAI's `POST /v1/chat/completions` for tests.

It plays a script: each item is a reply text (answered as `choices[0].message.content`, cut at the
first stop string of the request as a real endpoint does, with a usage block of about four
characters a token) or a `Status` (an HTTP error with headers and body). Every request is recorded
with its headers and JSON body. When the script runs out it answers 500 saying so. The plugin's
preflight request (before a run) is answered with `preflight_answer` and recorded in `preflights`,
apart from the script. `TrickleServer` answers slowly, a byte at a time, for deadline tests.

    server.script(["Thought: ...", Status(429, {"Retry-After": "0"}), "Thought: ..."])
    client = LLMClient(LLMSettings(model="gpt-4o", base_url=server.base_url))
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Status:
    """A scripted HTTP error answer."""

    code: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # JSON body; None: an OpenAI-style error object


@dataclass
class Raw:
    """A scripted 200 answer sent byte for byte (a huge body, a gzip bomb, JSON no encoder
    writes): `body` is sent with `headers` as they are."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # the parsed JSON body (or the raw text if it was not JSON)
    raw: str

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []

    @property
    def prompt_text(self) -> str:
        """All message contents joined, for `in` assertions."""
        return "\n".join(str(m.get("content", "")) for m in self.messages)


def _is_preflight(body: Any) -> bool:
    from pytest_super.llm import PREFLIGHT_PROMPT

    messages = body.get("messages") if isinstance(body, dict) else None
    return messages == [{"role": "user", "content": PREFLIGHT_PROMPT}]


def count_tokens(text: str) -> int:
    """The fake tokenizer: four characters a token."""
    return len(text) // 4


class FakeOpenAIServer:
    """Scripted OpenAI-compatible endpoint in a background thread."""

    def __init__(self, port: int = 0) -> None:
        self._items: deque[str | Status | Raw] = deque()
        # (marker, item): played once, to the first request whose raw body holds the marker
        self._routed: list[tuple[str, str | Status | Raw]] = []
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        # the plugin's preflight request is answered apart from the script (and recorded apart)
        self.preflights: list[RecordedRequest] = []
        self.preflight_answer: str | Status | Raw = "ok"
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and
            # the client's delayed ACK held every answer back 40 ms (the replay endpoint's too)
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw
                headers = {k.lower(): v for k, v in self.headers.items()}
                if _is_preflight(body):  # the plugin's check before a run: not part of the script
                    with server._lock:
                        server.preflights.append(RecordedRequest(self.path, headers, body, raw))
                        item = server.preflight_answer
                    if isinstance(item, Status):
                        self._send(item.code, item.body or {"error": {"message": "scripted"}})
                    elif isinstance(item, Raw):
                        self._send_raw(item)
                    else:
                        self._send(200, server._completion(body, item))
                    return
                with server._lock:
                    server.requests.append(RecordedRequest(self.path, headers, body, raw))
                    routed = next((r for r in server._routed if r[0] in raw), None)
                    if routed is not None:
                        server._routed.remove(routed)
                        item = routed[1]
                    else:
                        item = server._items.popleft() if server._items else None
                if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                elif item is None:
                    self._send(500, {"error": {"message": "fake server: the script ran out"}})
                elif isinstance(item, Raw):
                    self._send_raw(item)
                elif isinstance(item, Status):
                    payload = item.body
                    if payload is None:
                        payload = {"error": {"message": f"scripted status {item.code}"}}
                    self._send(item.code, payload, item.headers)
                else:
                    self._send(200, server._completion(body, item))

            def _send_raw(self, item: Raw) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(item.body)))
                for name, value in item.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                with contextlib.suppress(OSError):  # the client may stop reading early
                    self.wfile.write(item.body)

            def _send(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def script(self, items: list[str | Status | Raw]) -> None:
        """Append items to play, one per request, in order."""
        with self._lock:
            self._items.extend(items)

    def route(self, marker: str, item: str | Status | Raw) -> None:
        """Play `item` once, to the first request whose raw body holds `marker` (a text only one
        task's prompt holds), instead of the script's next item: which request of a parallel run
        comes third is chance, which task a reply goes to need not be."""
        with self._lock:
            self._routed.append((marker, item))

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._items)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @staticmethod
    def _completion(body: Any, text: str) -> dict[str, Any]:
        request = body if isinstance(body, dict) else {}
        stops = request.get("stop") or []
        if isinstance(stops, str):
            stops = [stops]
        finish = "stop"
        cut = min((text.find(s) for s in stops if s in text), default=-1)
        if cut >= 0:
            text = text[:cut]
        prompt = "".join(str(m.get("content", "")) for m in request.get("messages", []))
        prompt_tokens = count_tokens(prompt)
        completion_tokens = max(1, count_tokens(text))
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": request.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


class TrickleServer:
    """A raw socket server on 127.0.0.1 that answers every request slowly, for deadline tests.

    Each connection's request is read (headers and a Content-Length body); then `head` is sent at
    once and `tail` one byte every `interval` seconds, until the client hangs up or `stop()` (a
    `tail` ending in the headers makes the headers trickle; one after them, the body). `answered`
    counts the requests read.

        TrickleServer(b"HTTP/1.1 200 OK\\r\\n", b"X-Slow: " + b"a" * 10_000)  # headers trickle
    """

    def __init__(self, head: bytes, tail: bytes, *, interval: float = 1.0) -> None:
        self.head, self.tail, self.interval = head, tail, interval
        self.answered = 0
        self._stopped = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            match = re.search(rb"(?i)content-length:\s*(\d+)", head)
            length = int(match.group(1)) if match else 0
            while len(rest) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                rest += chunk
            self.answered += 1
            conn.sendall(self.head)
            for i in range(len(self.tail)):
                if self._stopped.wait(self.interval):
                    return
                conn.sendall(self.tail[i : i + 1])

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()
        self._thread.join(timeout=5)


def serve(port: int, replies: list[str]) -> None:
    """Serve `replies` on 127.0.0.1:`port` (0: any) until the process is killed, the port printed
    first: the endpoint as a process of its own, for tests that kill it
    (`python -m tests.support.openai_server PORT REPLY_FILE`, the file a JSON list of texts)."""
    import time

    server = FakeOpenAIServer(port)
    server.script(list(replies))
    print(server.port, flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    import sys

    with open(sys.argv[2], encoding="utf-8") as replies:
        serve(int(sys.argv[1]), json.load(replies))
