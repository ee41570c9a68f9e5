"""Dropping output noise before a model sees it, the way SUPER's reference harness does.

Owns `clean_observation`: the one cleaning rule for what LLM agents show their model. It drops
the same kinds of noise as the reference (`super/agent/utils.py` in SUPER's repository), in the
same order, so that histories and token counts are comparable with the paper's runs:

1. carriage returns become line breaks (every frame of a progress bar becomes a line of its own);
2. counter lines such as git's `Resolving deltas:  42% (6865/6929)` (one- or two-digit percent);
3. the text of any line that reports a speed in `MB/s` (its line break stays);
4. colour codes (`ESC[...m`; other escape sequences stay, as in the published episodes);
5. wget-style bars `  1% [====>   ]   1064960 / 104223768`, from the run of spaces and digits
   before the percent sign to the end of the line;
6. compiler chatter: every line that mentions `gcc`;
7. AllenNLP's parameter, initializer and util logs, and PyTorch module reprs (`Linear(in_features=`,
   `LayerNorm`, `Dropout(p=`) that model summaries print by the hundred;
8. `Downloading ... http ... NN%` lines.

A line is dropped with its line break (except the speed lines, emptied); the last line of a text
that does not end in a line break is never dropped, as in the reference. The rules are written as
line tests rather than the reference's whole-text regexes so that cleaning stays linear in the
size of the output (a regex starting with `.*` takes quadratic time on a long line). One quirk of
the reference is not copied: its bar rule may also swallow blank lines and the line break before a
bar; here only the bar's own line goes.

Landmarks and script-executed never see cleaned text: they are matched against the raw output.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_SGR = re.compile(r"\x1b\[[0-9;]*m")
_COUNTER = re.compile(r".*:\s*\d{1,2}%\s*\(\d*/\d*\)")
_BAR_END = re.compile(r"\]\s*\d*\s*/\s*\d*$")
_UTIL_LOG = re.compile(r"allennlp.common.util")  # the reference's dots match any character
_PERCENT = re.compile(r"\d%")  # `\d{1,3}%` holds wherever a digit precedes a percent sign
_DROPPED_IF_CONTAINS = (
    "gcc",
    "INFO - allennlp.common.params - ",
    "INFO - allennlp.nn.initializers",
    "Linear(in_features=",
    "LayerNorm",
    "Dropout(p=",
)


def clean_observation(text: str) -> str:
    """`text` without the noise SUPER's reference drops (see the module docstring)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _map_lines(text, _counter_speed_colour)
    text = _drop_bars(text)
    return _map_lines(text, _chatter)


def _map_lines(text: str, rule: Callable[[str, bool], str | None]) -> str:
    """Apply `rule(line, has_line_break)` to each line; it returns the line's new text (with or
    without its line break) or None to keep it as it is."""
    parts = text.split("\n")
    out = []
    for i, line in enumerate(parts):
        has_break = i < len(parts) - 1
        new = rule(line, has_break)
        out.append(new if new is not None else line + ("\n" if has_break else ""))
    return "".join(out)


def _counter_speed_colour(line: str, has_break: bool) -> str | None:
    if has_break and _COUNTER.match(line):
        return ""
    if "MB/s" in line:
        line = ""
    return _SGR.sub("", line) + ("\n" if has_break else "")


def _drop_bars(text: str) -> str:
    """wget-style bars: cut from the spaces and digits before the first percent sign to the end of
    the line, line break included, so what stood before joins the next line. A bar that starts its
    line also takes the whitespace before it (line breaks and blank lines), as `\\s*` does in the
    reference's pattern."""
    parts = text.split("\n")
    out: list[str] = []
    for i, line in enumerate(parts):
        start = _bar_start(line) if i < len(parts) - 1 else None
        if start is None:
            out.append(line + ("\n" if i < len(parts) - 1 else ""))
            continue
        if start == 0:
            while out and not out[-1].strip():
                out.pop()
            if out:
                out[-1] = out[-1].rstrip()
        out.append(line[:start])
    return "".join(out)


def _bar_start(line: str) -> int | None:
    percent = line.find("%")
    if percent < 0:
        return None
    end = _BAR_END.search(line, percent + 1)
    if end is None or "[" not in line[percent + 1 : end.start()]:
        return None
    start = percent
    while start > 0 and line[start - 1].isdigit():
        start -= 1
    while start > 0 and line[start - 1].isspace():
        start -= 1
    return start


def _chatter(line: str, has_break: bool) -> str | None:
    if not has_break:
        return None
    if any(word in line for word in _DROPPED_IF_CONTAINS) or _UTIL_LOG.search(line):
        return ""
    download = line.find("Downloading")
    if download >= 0:
        url = line.find("http", download + len("Downloading"))
        if url >= 0 and _PERCENT.search(line, url + len("http")):
            return ""
    return None
