"""Runs inside the kernel process: caps each message the kernel sends, before it is sent.

`runtime.JupyterKernel` ships this file's source into every kernel it connects to (the kernel's
Python need not have pytest-super installed), so it imports nothing from pytest_super.

Why in the kernel: a client can cap a message only after it has received, decoded and parsed all
of it. A cell printing 500 MB in one write becomes one 500 MB stream message, which took the
harness to 1.5 GB of memory. Cut here, no message of an ordinary cell exceeds the cap. Code that
undoes this hook meets the harness's own limit at the ZeroMQ level (`runtime.max_frame_bytes`),
which drops an oversized frame before it is read into memory.

`install(cap_bytes)` wraps `jupyter_client.session.Session.serialize`, through which every message
of the kernel passes (IOPub streams, displays, results and errors; shell replies). A message whose
strings could encode to more than `cap_bytes` is shrunk: stream text, text/plain and error texts
keep their head and tail around a marker line; other mime types of an oversized display are left
out (and named).
"""

from __future__ import annotations

import json
from typing import Any

#: a character JSON-escaped takes at most 6 bytes ("\u0000"): below this many characters per
#: byte of the cap a message cannot exceed it, and nothing is measured
JSON_BYTES_PER_CHAR_MAX = 6
#: the same line the harness's own cap (`output.CappedText`) puts where it cut
MARKER = "\n... [{} bytes cut] ...\n"
#: set (true) in the content of a message this module cut, so that the client knows
CUT_KEY = "pytest_super_cut"
_DISPLAYS = ("execute_result", "display_data", "update_display_data")


def install(cap_bytes: int) -> None:
    """Cap every message this kernel process sends at about `cap_bytes`. Idempotent."""
    from jupyter_client.session import Session

    original = getattr(Session, "_pytest_super_serialize", Session.serialize)
    safe = cap_bytes // JSON_BYTES_PER_CHAR_MAX  # characters that always fit

    def serialize(
        self: Session, msg: dict[str, Any], ident: Any = None
    ) -> list[bytes]:  # Any: jupyter_client
        content = msg.get("content")
        if isinstance(content, dict) and _chars(content, safe) > safe:
            msg_type = msg.get("msg_type") or msg.get("header", {}).get("msg_type", "")
            msg = dict(msg, content=shrink(msg_type, content, cap_bytes))
        return original(self, msg, ident)

    Session._pytest_super_serialize = original  # type: ignore[attr-defined]
    Session.serialize = serialize  # type: ignore[method-assign]


def shrink(msg_type: str, content: dict[str, object], cap_bytes: int) -> dict[str, object]:
    """`content` of a `msg_type` message with its large texts cut to fit in `cap_bytes`."""
    original, content = content, dict(content)
    if msg_type == "stream":
        content["text"] = cut(str(content.get("text", "")), cap_bytes // 2)
    elif msg_type in _DISPLAYS:
        data = content.get("data")
        if not isinstance(data, dict):
            data = {}
        left_out = sorted(str(kind) for kind in data if kind != "text/plain")
        note = f"\n[{', '.join(left_out)} left out: the display was larger than {cap_bytes} bytes]"
        text = cut(str(data.get("text/plain", "")), cap_bytes // 2)
        content["data"] = {"text/plain": text + note if left_out else text}
        content["metadata"] = {}
    if "ename" in content:  # error messages, and replies of a cell that raised
        content["ename"] = cut(str(content["ename"]), 1000)
        content["evalue"] = cut(str(content.get("evalue", "")), cap_bytes // 8)
        traceback = content.get("traceback")
        if isinstance(traceback, list):
            joined = "\n".join(map(str, traceback))
            short = cut(joined, cap_bytes // 4)
            if short is not joined:
                content["traceback"] = [short]
    if any(content[key] is not original.get(key) for key in content):
        content[CUT_KEY] = True
    return content


def cut(text: str, budget_bytes: int) -> str:
    """`text` if it encodes (as JSON) within `budget_bytes`, else its head and tail around a marker."""
    if len(text) * JSON_BYTES_PER_CHAR_MAX <= budget_bytes:
        return text
    if len(text) <= budget_bytes and _json_bytes(text) <= budget_bytes:
        return text
    half = max(budget_bytes // 2 - 200, 0)  # room for the marker
    head = _fit(text, half, from_end=False)
    tail = _fit(text, half, from_end=True)
    dropped = len(text) - len(head) - len(tail)
    if not text.isascii():  # constant time in CPython; only then is the middle encoded
        dropped = len(text[len(head) : len(text) - len(tail)].encode("utf-8", "surrogatepass"))
    return head + MARKER.format(dropped) + tail


def _fit(text: str, budget_bytes: int, *, from_end: bool) -> str:
    """The longest start (or end) of `text` found that encodes within `budget_bytes`."""
    n = min(len(text), budget_bytes)
    while n > 0:
        piece = text[len(text) - n :] if from_end else text[:n]
        size = _json_bytes(piece)
        if size <= budget_bytes:
            return piece
        n = min(n - 1, n * budget_bytes // size)  # shrink in proportion: few rounds
    return ""


def _json_bytes(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _chars(value: object, limit: int) -> int:
    """Characters in the strings (and items) of `value`, counted until past `limit`."""
    total = 0
    stack = [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            total += len(item)
            for key, inner in item.items():
                stack.append(key)
                stack.append(inner)
        elif isinstance(item, (list, tuple)):
            total += len(item)
            stack.extend(item)
        else:
            total += 1
    return total
