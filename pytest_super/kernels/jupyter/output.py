"""Cell output text: capping what a cell prints, and cleaning it for a language model.

`CappedText` keeps the head and the tail of a stream of text within a byte budget, so a cell that
prints 50 MB cannot blow the harness's memory. `clean_for_model` strips escape sequences and
control characters and collapses progress bars; it is for what an agent shows its model, never
for landmark matching (landmarks see the raw text). `console_text` is the one cleaning for whatever the console prints of a task's
output or a model's text: nothing there can drive the user's terminal.
"""

from __future__ import annotations

import re

#: Escape sequences, in their 7-bit (ESC ...) and 8-bit (C1) forms, removed whole so that text
#: stays readable: CSI (colours, cursor moves), the strings OSC (titles, clipboard, hyperlinks),
#: DCS, SOS, PM and APC up to their terminator, and every other escape (ESC, intermediates, final).
#: One pass: what the removal joins back into a sequence loses its ESC to `_CONTROLS` after.
_ANSI = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x80-\x9f]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)
#: Every control character (C0, DEL, C1) but tab, newline and carriage return: what is left of a
#: sequence (a lone ESC, an unterminated string's opener, BEL, backspace) can drive no terminal.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# A line that is one frame of a progress bar: tqdm (` 45%|####  | 45/100 [...]`), Keras
# (`12/100 [==>....] - ETA`), pip/rich (`━━━━━━━━ 1.2/3.4 MB`).
# `(?<!\d)`: a run of digits is tried once, not from each of its digits (quadratic: 9 s for
# 120,000 lines of 100 digits, measured).
_PROGRESS_LINE = re.compile(r"\d{1,3}%\|.*\||(?<!\d)\d+/\d+ \[[=>.]*\]|━{3,}")


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences (colours, cursor movement, titles, clipboard writes) and
    every control character but tab, newline and carriage return.

    No ESC and no C1 character is left, so no sequence can act, however it was nested or split
    (`ESC ESC[m ]52;...BEL` loses its inner CSI, then the ESC that would have opened the OSC).
    """
    return _CONTROLS.sub("", _ANSI.sub("", text))


def console_text(text: str) -> str:
    """`text` made safe to print on the user's terminal: `strip_ansi`, and a carriage return that
    does not end a line starts a new one (so no text hides what went before it on its line).

    For everything the console shows of a task's output or a model's text: failure messages,
    `--super-live`, the summary.
    """
    return strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n")


def clean_for_model(text: str) -> str:
    """Return `text` as a person would last have seen it on a terminal, minus colours.

    Escape sequences and control characters are removed (`strip_ansi`); a line rewritten with carriage returns keeps only its last non-empty
    segment; a run of consecutive progress-bar lines keeps only its last line.
    """
    text = strip_ansi(text).replace("\r\n", "\n")
    lines = [_last_segment(line) for line in text.split("\n")]
    kept: list[str] = []
    for line in lines:
        if kept and _is_progress(line) and _is_progress(kept[-1]):
            kept[-1] = line
        else:
            kept.append(line)
    return "\n".join(kept)


def _is_progress(line: str) -> bool:
    # every progress line holds one of these characters; most lines hold none and skip the regex
    return ("|" in line or "[" in line or "━" in line) and _PROGRESS_LINE.search(line) is not None


def _last_segment(line: str) -> str:
    if "\r" not in line:
        return line
    for segment in reversed(line.split("\r")):
        if segment:
            return segment
    return ""


class CappedText:
    """Text appended piece by piece, of which at most `cap_bytes` (UTF-8) are kept.

    When more arrives, the first half of the budget and the latest half are kept and the middle
    is replaced by a line `... [N bytes cut] ...`. Memory stays within about `cap_bytes` plus the
    piece being appended, however much is appended.
    """

    def __init__(self, cap_bytes: int) -> None:
        self._half = max(cap_bytes, 2) // 2
        self._head = bytearray()
        self._tail = bytearray()
        self.cut_bytes = 0
        self._last_char = ""
        self._cut_before = False

    @property
    def truncated(self) -> bool:
        """Was anything dropped, here or before the text arrived (`mark_cut_before`)?"""
        return self.cut_bytes > 0 or self._cut_before

    def mark_cut_before(self) -> None:
        """Note that a piece was cut before it was appended (in the kernel, which says where)."""
        self._cut_before = True

    def __bool__(self) -> bool:
        return bool(self._head)

    def append(self, text: str) -> None:
        """Append raw text (stream output)."""
        if not text:
            return
        self._last_char = text[-1]
        data = text.encode("utf-8", "replace")
        room = self._half - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
            if not data:
                return
        if len(data) >= self._half:
            self.cut_bytes += len(self._tail) + len(data) - self._half
            self._tail = bytearray(data[-self._half :])
            return
        self._tail += data
        if len(self._tail) > 2 * self._half:  # trim in batches: amortised O(1) per byte
            drop = len(self._tail) - self._half
            del self._tail[:drop]
            self.cut_bytes += drop

    def append_block(self, text: str) -> None:
        """Append a result or error: on a line of its own, ending with a newline."""
        if not text:
            return
        if self and self._last_char != "\n":
            self.append("\n")
        self.append(text if text.endswith("\n") else text + "\n")

    def text(self) -> str:
        """The kept text; the cut marker stands where bytes were dropped."""
        if len(self._tail) > self._half:
            drop = len(self._tail) - self._half
            del self._tail[:drop]
            self.cut_bytes += drop
        if not self.cut_bytes:
            return (self._head + self._tail).decode("utf-8", "replace")
        head = self._head.decode("utf-8", "ignore")
        tail = self._tail.decode("utf-8", "ignore")
        sep = "" if head.endswith("\n") else "\n"
        return f"{head}{sep}... [{self.cut_bytes} bytes cut] ...\n{tail}"
