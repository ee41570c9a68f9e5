"""The requests the reference agent sent, per episode and turn, and how a request of ours differs.

`read_expected(path)` reads a file `scripts/reference-requests.py` writes from an upstream
checkout (`<run>.jsonl.xz`: a header line, then one line per episode with its `requests`, each
request's messages delta-coded against the run's previous request) into `ExpectedRequests`:
by task id, the full requests (`messages`, `stop`, `temperature`, `top_p`, `max_tokens`).

`request_difference(turn, ours, expected)` compares one request of ours with the reference's for
that turn: the first field that differs, and for the messages the first message and the character
offset where they part, with an excerpt of each side (`RequestDifference.line`).
"""

from __future__ import annotations

import json
import lzma
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, cast

from pytest_super.errors import SuperError

#: the request fields compared besides the messages
PARAMETERS = ("stop", "temperature", "top_p", "max_tokens")
#: characters of each side shown from the offset where they part
EXCERPT = 60
#: a chat request as compared: its "messages" (role/content objects) and PARAMETERS' values
Request: TypeAlias = dict[str, object]


class ExpectedRequestsError(SuperError):
    """A file of expected requests that cannot be read: names the file and what to do."""


@dataclass(frozen=True)
class ExpectedRequests:
    """One run's reference requests: by task id, the list of requests in turn order."""

    run: str
    episodes: dict[str, list[Request]]

    def total(self) -> int:
        return sum(len(r) for r in self.episodes.values())


def read_expected(path: Path) -> ExpectedRequests:
    """The expected requests of `path` (see the module docstring)."""
    try:
        lines = lzma.decompress(Path(path).read_bytes()).decode("utf-8").split("\n")
        header = json.loads(lines[0])
        records = [json.loads(line) for line in lines[1:] if line]
        run = str(header["run"])
        previous: list[str] = []
        episodes = {str(r["task_id"]): _decode(r["requests"], previous) for r in records}
    except (
        OSError,
        lzma.LZMAError,
        UnicodeDecodeError,
        ValueError,
        KeyError,
        TypeError,
        IndexError,
    ) as exc:
        raise ExpectedRequestsError(
            f"{path}: not a file of expected requests ({type(exc).__name__}: {exc}); "
            "regenerate it with scripts/reference-requests.py UPSTREAM_CHECKOUT"
        ) from None
    return ExpectedRequests(run, episodes)


def _decode(
    # Any: json.loads (the file's records: read_expected catches what a wrong shape raises)
    coded: list[dict[str, Any]],
    previous: list[str],
) -> list[Request]:
    requests = []
    for request in coded:
        messages = []
        for i, (role, keep, add) in enumerate(request["messages"]):
            before = previous[i] if i < len(previous) else ""
            messages.append({"role": role, "content": before[:keep] + add})
        previous[:] = [m["content"] for m in messages]
        requests.append({"messages": messages, **{k: request[k] for k in PARAMETERS}})
    return requests


@dataclass(frozen=True)
class RequestDifference:
    """Where one request of ours parts from the reference's at the same turn."""

    turn: int  # 1-based: the episode's n-th model call
    field: str  # "messages" or one of PARAMETERS
    message: int | None = None  # 0-based index of the first differing message
    role: str = ""
    offset: int | None = None  # the character offset in that message where they part
    ours: str = ""
    expected: str = ""

    def line(self) -> str:
        if self.field != "messages":
            where = self.field
        else:
            where = f"message {self.message} ({self.role or 'missing'}), character {self.offset}"
        return f"request {self.turn}: {where}: ours {self.ours}, reference {self.expected}"


def _excerpt(text: str, offset: int) -> str:
    start = max(0, offset - 10)
    shown = text[start : offset + EXCERPT]
    return json.dumps(("..." if start else "") + shown, ensure_ascii=False)


def request_difference(turn: int, ours: Request, expected: Request) -> RequestDifference | None:
    """The first difference between our request at `turn` and the reference's; None if equal."""
    for name in PARAMETERS:
        if ours.get(name) != expected.get(name):
            return RequestDifference(
                turn, name, ours=json.dumps(ours.get(name)), expected=json.dumps(expected[name])
            )
    mine = cast("list[object]", ours.get("messages") or [])  # the endpoint kept a list
    theirs = cast("list[dict[str, object]]", expected["messages"])  # as _decode made them
    for i in range(max(len(mine), len(theirs))):
        a = cast(
            "dict[str, object]", mine[i] if i < len(mine) and isinstance(mine[i], dict) else {}
        )
        b = theirs[i] if i < len(theirs) else {}
        text_a, text_b = str(a.get("content", "")), str(b.get("content", ""))
        if a.get("role") == b.get("role") and text_a == text_b and a and b:
            continue
        offset = next(
            (k for k, (x, y) in enumerate(zip(text_a, text_b, strict=False)) if x != y),
            min(len(text_a), len(text_b)),
        )
        if a.get("role") != b.get("role"):
            offset = 0
        return RequestDifference(
            turn,
            "messages",
            message=i,
            role=str(b.get("role") or a.get("role") or ""),
            offset=offset,
            ours=_excerpt(text_a, offset) if a else "(no message)",
            expected=_excerpt(text_b, offset) if b else "(no message)",
        )
    return None
