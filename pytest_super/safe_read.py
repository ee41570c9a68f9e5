"""Reading what this run did not write itself: earlier runs' results.jsonl, JUnit files, foreign
trajectories, the paper's published episodes.

Such a file may be anything: a FIFO or a folder under the expected name, gigabytes, JSON nested
100,000 deep, a score of `"high"` or `Infinity`. Every reader of such data goes through here:

- `read_regular_file(path, max_bytes)`: the bytes of a regular file only (checked before it is
  opened, and again on the open descriptor, which is opened non-blocking so that a FIFO swapped in
  between cannot block), at most `max_bytes` of them;
- `loads(text, source, max_depth)`: JSON with a bound on its nesting, checked before it is parsed;
- `check_record(data)`: a results record's fields have the types and ranges the reports need.

Each raises `ForeignDataError` with a message that names the file (and line, and field) and what
is wrong; the readers name it and skip that part, never the whole run.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
from typing import Any

from pytest_super.errors import SuperError

#: JSON nesting allowed in foreign data (a results record is flat, a notebook about 6 deep)
MAX_DEPTH = 64
#: results.jsonl of an earlier run (10,000 tasks of ~1 KB each, five times over, fit in it)
RESULTS_MAX_BYTES = 128 * 1024 * 1024
#: a JUnit XML file given to `pytest-super report`
JUNIT_MAX_BYTES = 256 * 1024 * 1024
#: a file of SUPER's JSON lines (its published sets are a few MB; 100,000 rows of 2 KB fit)
JSONL_MAX_BYTES = 256 * 1024 * 1024
#: a YAML task file, a prompt file or template, a config file pytest would read (each a few KB)
SMALL_MAX_BYTES = 16 * 1024 * 1024

#: scores: a share of the task, in [0, 1]
SCORE_FIELDS = ("accuracy", "landmarks", "submitted", "script_executed")
#: counts and amounts: zero or more
AMOUNT_FIELDS = ("prompt_tokens", "completion_tokens", "cost_usd", "duration_s", "steps")
#: text fields the reports show or compare
TEXT_FIELDS = ("set", "category", "agent", "model", "exit_status", "trajectory", "image")
OUTCOMES = ("passed", "failed", "error", "skipped")
_EMPTY = (None, "", "None")  # JUnit files carry "" and older ones "None" for no value
_BOOLS = {"True": 1.0, "true": 1.0, "False": 0.0, "false": 0.0}


class ForeignDataError(SuperError):
    """A file (or a part of one) this run did not write cannot be read: the message names it and
    what is wrong with it; `reason` says what is wrong without the name (for a reader whose own
    error names the file its way)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


def _unread(path: str | os.PathLike[str], reason: str) -> ForeignDataError:
    return ForeignDataError(f"{path}: {reason}", reason)


def read_regular_file(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of `path` if it is a regular file of at most `max_bytes` bytes."""
    try:
        before = os.stat(path)
        _check_regular(path, before, max_bytes)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _unread(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "rb") as f:
            _check_regular(path, os.fstat(fd), max_bytes)  # what was opened, not what was seen
            data = f.read(max_bytes + 1)
    except OSError as exc:  # a folder, or an I/O error half-way
        raise _unread(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise _unread(path, f"larger than {_size(max_bytes)}; not read")
    return data


def read_text_file(path: str | os.PathLike[str], max_bytes: int = SMALL_MAX_BYTES) -> str:
    """The UTF-8 text (a BOM dropped) of a regular file of at most `max_bytes` bytes."""
    data = read_regular_file(path, max_bytes)
    try:
        return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _unread(path, f"not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def replace_hint(max_bytes: int) -> str:
    """What to do about a file `read_regular_file` refused."""
    return f"make it a regular file of at most {_size(max_bytes)}, or remove it"


def _check_regular(path: str | os.PathLike[str], st: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise _unread(path, f"not a regular file ({_kind(st.st_mode)}); not read")
    if st.st_size > max_bytes:
        raise _unread(
            path, f"{_size(st.st_size)}, larger than the {_size(max_bytes)} read; not read"
        )


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a file"


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB" if n >= 1024 * 1024 else f"{n} bytes"


#: a JSON string once its escapes are gone
_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def check_depth(text: str, max_depth: int = MAX_DEPTH) -> None:
    """Raise ValueError if the JSON `text` nests arrays and objects deeper than `max_depth` (the
    brackets inside strings do not count). The text need not be valid JSON.

    At the speed of str.replace and the regex engine (a 50 MB notebook takes about as long as its
    parse): escaped backslashes go first, then escaped quotes (as a left-to-right scan pairs them:
    a run of backslashes is pairs, and an odd one out escapes the next character), so every `"`
    left opens or closes a string; then strings go, then all but brackets, which are counted."""
    if text.count("[") + text.count("{") <= max_depth:
        return
    plain = text.replace("\\\\", "").replace('\\"', "")
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", plain))
    steps = (1 if c in "[{" else -1 for c in brackets)
    if max(itertools.accumulate(steps), default=0) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")


def loads(
    text: str | bytes, source: str, max_depth: int = MAX_DEPTH
) -> Any:  # Any: json.loads (foreign JSON: each caller checks the shape it reads)
    """JSON of foreign data: nested at most `max_depth` deep; `source` names it in the error."""
    try:
        if isinstance(text, bytes):
            text = text.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
        check_depth(text, max_depth)
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ForeignDataError(f"{source}: not readable JSON ({str(exc)[:200]})") from None


def read_json_file(
    path: str | os.PathLike[str], max_bytes: int, max_depth: int = MAX_DEPTH
) -> Any:  # Any: json.loads (as `loads`)
    """The JSON value of a regular file of at most `max_bytes` bytes, nested at most
    `max_depth` deep."""
    return loads(read_regular_file(path, max_bytes), str(path), max_depth)


def number(value: object, *, low: float = 0.0, high: float = math.inf) -> float | None:
    """A record's number (a JSON number, a bool, or the text JUnit properties hold) as a float in
    [low, high]; None for no value. Raises ValueError saying what is wrong."""
    if value in _EMPTY:
        return None
    if isinstance(value, int | float):  # bool too
        try:
            result = float(value)
        except OverflowError:  # an integer of hundreds of digits
            raise ValueError("not a finite number") from None
    elif isinstance(value, str) and value in _BOOLS:
        result = _BOOLS[value]
    elif isinstance(value, str):
        try:
            result = float(value)
        except ValueError:
            raise ValueError("not a number") from None
    else:
        raise ValueError(f"a {type(value).__name__}, not a number")
    if not math.isfinite(result):
        raise ValueError("not a finite number")
    if not low <= result <= high:
        raise ValueError(f"outside [{low:g}, {high:g}]")
    return result


def check_record(data: object) -> None:
    """Raise ValueError naming the field, its value and what is wrong unless `data` is a task
    record the reports can read: task_id text, outcome one of OUTCOMES, scores in [0, 1], token
    counts, cost, duration and steps finite and not negative, text fields text."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    if not isinstance(data.get("task_id"), str):
        raise ValueError(f"task_id {_shown(data.get('task_id'))}: not text")
    if data.get("outcome") not in OUTCOMES:
        raise ValueError(f"outcome {_shown(data.get('outcome'))}: not one of {', '.join(OUTCOMES)}")
    for name in (*SCORE_FIELDS, *AMOUNT_FIELDS):
        high = 1.0 if name in SCORE_FIELDS else math.inf
        try:
            number(data.get(name), high=high)
        except ValueError as exc:
            raise ValueError(f"{name} {_shown(data[name])}: {exc}") from None
    for name in TEXT_FIELDS:
        if data.get(name) is not None and not isinstance(data[name], str):
            raise ValueError(f"{name} {_shown(data[name])}: not text")


def _shown(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
