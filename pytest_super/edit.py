"""SUPER's edit tool: parse an edit action, apply it to a file's text, and explain failures.

Owns the edit action format of ReAct-SUPER and of `edit` cells in task files:

    <file name>
    [optional lines that stand just before the lines to replace]
    <<<BEFORE_EDIT>>>
    <lines to replace>
    <<<AFTER_EDIT>>>
    <new lines>

and the detailed feedback the SUPER paper used (whitespace hint, longest partial match, occurrences
with context). `parse_edit`, `format_edit` and `apply_edit` are pure; `edit_file` reads and writes
the file's bytes through a kernel.

The edge cases follow the reference tool (`super/env/edit_aci.py`): blank lines after the new lines
are dropped, a missing `<<<AFTER_EDIT>>>` deletes the lines to replace, lines before with nothing to
replace insert the new lines after them, and a file that does not exist is an error (an edit never
creates a file). A file that is not UTF-8 keeps the bytes of every line the edit does not touch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_super.kernels.base import Kernel

BEFORE_MARKER = "<<<BEFORE_EDIT>>>"
AFTER_MARKER = "<<<AFTER_EDIT>>>"

EDIT_FORMAT = f"""The edit format is:
<file name>
[optional: 1-3 lines that stand just before the lines to replace, to pick one occurrence]
{BEFORE_MARKER}
<the lines to replace, exactly as they are in the file>
{AFTER_MARKER}
<the new lines>"""

#: lines of the file shown around each occurrence of an ambiguous edit (the reference shows 2)
_AROUND = 2
#: lines shown before and after the new lines of a successful edit: the published episodes'
#: feedback (and the reference's window) shows 7 lines before and 6 after
SHOWN_BEFORE_EDIT = 7
SHOWN_AFTER_EDIT = 6


class EditFormatError(ValueError):
    """An edit action is malformed. The message says what is wrong and shows the expected format."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"Malformed edit: {problem}\n{EDIT_FORMAT}")


@dataclass(frozen=True)
class EditRequest:
    """Replace the lines `before` of `file` with `after`.

    `before`, `after` and `context` hold whole lines; a final newline is optional (`"a\\nb"` and
    `"a\\nb\\n"` are the same two lines, `""` is no lines, `"\\n"` is one blank line).
    """

    file: str
    before: str  # the exact lines to replace
    after: str  # the new lines
    context: str = ""  # optional lines that stand just before `before` in the file


@dataclass(frozen=True)
class EditOutcome:
    """What an edit did: the feedback for the agent and, when it worked, the new file text."""

    ok: bool
    message: str  # the feedback shown to the agent
    new_text: str | None  # the edited file text when ok


def _lines(block: str) -> list[str]:
    """The lines of a block of whole lines (one final newline optional)."""
    if block == "":
        return []
    if block.endswith("\n"):
        block = block[:-1]
    return block.split("\n")


def _block(lines: list[str]) -> str:
    """The canonical text of whole lines: each line ends with a newline."""
    return "".join(line + "\n" for line in lines)


# --- the action text ----------------------------------------------------------------------------


def parse_edit(content: str) -> EditRequest:
    """Parse the content of an edit action. Raises EditFormatError with the expected format.

    `before`, `after` and `context` of the result are in canonical form (each line ends with a
    newline). As in the reference, blank lines at the very end are dropped (they do not add blank
    lines after the new ones), and an edit without `<<<AFTER_EDIT>>>` deletes the lines to replace.
    """
    content = content.replace("\r\n", "\n").rstrip("\n")
    lines = content.split("\n")
    while len(lines) > 1 and not lines[0].strip():
        lines.pop(0)  # blank lines before the file name (e.g. right after <content>)
    file = lines[0].strip()
    if not file or file in (BEFORE_MARKER, AFTER_MARKER):
        raise EditFormatError("the first line must be the name of the file to edit")
    sections: list[list[str]] = [[], [], []]  # context, before, after
    section = 0
    for number, line in enumerate(lines[1:], start=2):
        marker = line.strip()
        if marker == BEFORE_MARKER:
            if section != 0:
                where = "a second" if section == 1 else "it after"
                raise EditFormatError(f"line {number} has {where} {BEFORE_MARKER}")
            section = 1
        elif marker == AFTER_MARKER:
            if section != 1:
                problem = (
                    f"line {number} has {AFTER_MARKER} before any {BEFORE_MARKER}"
                    if section == 0
                    else f"line {number} has a second {AFTER_MARKER}"
                )
                raise EditFormatError(problem)
            section = 2
        else:
            sections[section].append(line)
    if section == 0:
        raise EditFormatError(f"the line {BEFORE_MARKER} is missing")
    context, before, after = sections  # no AFTER marker: no new lines (the reference deletes)
    if not before and not after:
        raise EditFormatError("there are no lines to replace and no new lines")
    return EditRequest(
        file=file, before=_block(before), after=_block(after), context=_block(context)
    )


def format_edit(request: EditRequest) -> str:
    """The edit action content for a request; `parse_edit` gives the request back (canonical)."""
    return (
        f"{request.file}\n"
        f"{_block(_lines(request.context))}"
        f"{BEFORE_MARKER}\n"
        f"{_block(_lines(request.before))}"
        f"{AFTER_MARKER}\n"
        f"{_block(_lines(request.after))}"
    )


# --- applying an edit to text -------------------------------------------------------------------


def _split_lines(text: str) -> tuple[list[str], list[str]]:
    """A file's lines without their endings, and each line's ending ("\n", "\r\n" or "" for a
    last line without one), so that an edit keeps every line ending it does not touch."""
    if not text:
        return [], []
    parts = text.split("\n")
    last = parts.pop()  # "" when the text ends with a newline
    lines, endings = [], []
    for part in parts:
        crlf = part.endswith("\r")
        lines.append(part[:-1] if crlf else part)
        endings.append("\r\n" if crlf else "\n")
    if last:
        lines.append(last)
        endings.append("")
    return lines, endings


def _same(file_line: str, wanted: str, *, strip: bool) -> bool:
    if strip:
        return file_line.strip() == wanted.strip()
    if not file_line.strip() and not wanted.strip():
        return True  # a blank line matches a blank line
    return file_line == wanted


def _find(file_lines: list[str], wanted: list[str], *, strip: bool = False) -> list[int]:
    """Indices where `wanted` stands as consecutive lines of the file."""
    n = len(wanted)
    return [
        i
        for i in range(len(file_lines) - n + 1)
        if all(_same(file_lines[i + j], wanted[j], strip=strip) for j in range(n))
    ]


def _longest_partial(file_lines: list[str], wanted: list[str]) -> tuple[int, int, int] | None:
    """The longest run of consecutive requested lines that match consecutive file lines.

    Returns (start in wanted, start in file, length), or None when no non-blank line matches.
    Runs made only of blank lines do not count.
    """
    best: tuple[int, int, int] | None = None
    previous = [0] * (len(file_lines) + 1)
    for w in range(len(wanted)):
        current = [0] * (len(file_lines) + 1)
        for f in range(len(file_lines)):
            if _same(file_lines[f], wanted[w], strip=False):
                current[f + 1] = previous[f] + 1
                length = current[f + 1]
                if best is None or length > best[2]:
                    start_w, start_f = w - length + 1, f - length + 1
                    if any(line.strip() for line in wanted[start_w : w + 1]):
                        best = (start_w, start_f, length)
        previous = current
    return best


def _numbered(file_lines: list[str], start: int, stop: int, *, exact: bool = False) -> str:
    """File lines [start, stop) with 1-based numbers; `exact` shows them as repr (whitespace)."""
    start, stop = max(start, 0), min(stop, len(file_lines))
    width = len(str(stop))
    shown = []
    for i in range(start, stop):
        line = file_lines[i]
        shown.append(f"{i + 1:>{width}}| {line!r}" if exact else f"{i + 1:>{width}}| {line}")
    return "\n".join(shown)


def _span(first: int, count: int) -> str:
    """'line 3' or 'lines 3-5' for `count` lines starting at 0-based `first`."""
    return f"line {first + 1}" if count == 1 else f"lines {first + 1}-{first + count}"


def _malformed(problem: str) -> EditOutcome:
    return EditOutcome(False, str(EditFormatError(problem)), None)


def apply_edit(text: str, request: EditRequest) -> EditOutcome:
    """Apply an edit to a file's text. Never raises for a bad edit: the outcome says what is wrong."""
    context, before, after = _lines(request.context), _lines(request.before), _lines(request.after)
    file_lines, endings = _split_lines(text)

    if not before and not context:
        if text:
            return _malformed(
                f"no lines to replace in {request.file}: give the existing lines to replace"
                f" between {BEFORE_MARKER} and {AFTER_MARKER}, or the lines after which to insert"
                f" above {BEFORE_MARKER} (only an empty file may be written without them)"
            )
        return EditOutcome(
            True, f"Wrote {len(after)} line(s) to {request.file} (it was empty).", _block(after)
        )

    wanted = context + before
    found = _find(file_lines, wanted)
    if len(found) == 1:
        start = found[0] + len(context)
        return _applied(request.file, file_lines, endings, start, before, after)
    what = (
        "the lines to replace" + (" with the lines before them" if context else "")
        if before
        else "the lines to insert after"
    )
    if len(found) > 1:
        return _ambiguous(request.file, file_lines, found, what, len(context), len(before))
    return _not_found(request.file, file_lines, wanted, what)


def _applied(
    file: str,
    file_lines: list[str],
    endings: list[str],
    start: int,
    before: list[str],
    after: list[str],
) -> EditOutcome:
    """The edit that matched once, at line `start` (0-based): the new text, and what was done
    with the file's lines around the edit shown."""
    stop = start + len(before)
    edited = file_lines[:start] + after + file_lines[stop:]
    new_text = _spliced_text(edited, endings, start, stop, len(after))
    if not before:
        done = f"Inserted {len(after)} line(s) after line {start} of {file}."
    elif after:
        done = f"Replaced {_span(start, len(before))} of {file} with {len(after)} line(s)."
    else:
        done = f"Deleted {_span(start, len(before))} of {file}."
    shown = _numbered(edited, start - SHOWN_BEFORE_EDIT, start + len(after) + SHOWN_AFTER_EDIT)
    message = (
        f"Edit was successful. {done} The file now reads, around the edit"
        f" (check the indentation):\n{shown}"
        if shown
        else f"Edit was successful. {done} The file is now empty."
    )
    return EditOutcome(True, message, new_text)


def _spliced_text(
    edited: list[str], endings: list[str], start: int, stop: int, inserted: int
) -> str:
    """The edited lines joined with their line endings: the file's own where lines were kept, its
    dominant one (CRLF or LF) for the `inserted` lines; a file without a final newline keeps
    none."""
    new_ending = "\r\n" if endings.count("\r\n") > endings.count("\n") else "\n"
    edited_endings = endings[:start] + [new_ending] * inserted + endings[stop:]
    if stop == len(endings) and endings[-1] == "":  # no final newline: keep it that way
        if start == stop and inserted:  # lines inserted after the last line
            edited_endings[start - 1] = new_ending
        if edited_endings:
            edited_endings[-1] = ""
    return "".join(line + end for line, end in zip(edited, edited_endings, strict=True))


def _ambiguous(
    file: str, file_lines: list[str], found: list[int], what: str, context: int, before: int
) -> EditOutcome:
    """The lines matched more than once: the first two occurrences, and how to pick one."""
    parts = [
        f"Found {what} {len(found)} times in {file}, so the edit is ambiguous."
        f" Add 1-3 lines that stand just before the occurrence you mean above"
        f" {BEFORE_MARKER}. The first two occurrences:"
    ]
    for number, index in enumerate(found[:2], start=1):
        start = index + context
        parts.append(
            f"Occurrence {number}, {_span(start, before)}:\n"
            + _numbered(file_lines, index - _AROUND, start + before + _AROUND)
        )
    return EditOutcome(False, "\n".join(parts), None)


def _not_found(file: str, file_lines: list[str], wanted: list[str], what: str) -> EditOutcome:
    """The lines matched nowhere: whether only their whitespace differs, else the longest part
    that matches and where it stops matching."""
    requested = "\n".join(wanted)
    header = f"Could not find {what} in {file}:\n```\n{requested}\n```"
    loose = _find(file_lines, wanted, strip=True)
    if loose:
        index = loose[0]
        wanted_shown = "\n".join(repr(line) for line in wanted)
        return EditOutcome(
            False,
            f"{header}\nThey would match if leading/trailing whitespace were ignored:"
            f" the whitespace differs. The file's {_span(index, len(wanted))}, with their exact"
            f" whitespace (as Python strings):\n"
            f"{_numbered(file_lines, index, index + len(wanted), exact=True)}\n"
            f"Your lines:\n{wanted_shown}\n"
            f"Copy the file's lines exactly, whitespace included.",
            None,
        )
    partial = _longest_partial(file_lines, wanted)
    if partial is None:
        return EditOutcome(
            False,
            f"{header}\nNone of these lines is in the file. Look at the file first"
            f" (for example `!cat -n {file}`) and copy the lines exactly.",
            None,
        )
    return EditOutcome(False, header + _partial_match(file_lines, wanted, partial), None)


def _partial_match(file_lines: list[str], wanted: list[str], partial: tuple[int, int, int]) -> str:
    """Where the longest matching part of `wanted` stands in the file, and the lines on either
    side of it that do not match."""
    w_start, f_start, length = partial
    message = (
        f"\nThe longest part that matches: your {_span(w_start, length)} of"
        f" {len(wanted)} {'matches' if length == 1 else 'match'} the file's"
        f" {_span(f_start, length)}:\n"
        f"{_numbered(file_lines, f_start, f_start + length)}"
    )
    w_next, f_next = w_start + length, f_start + length
    if w_next < len(wanted):
        if f_next < len(file_lines):
            message += (
                f"\nThe next line you gave, {wanted[w_next]!r}, differs from the file's"
                f" line {f_next + 1}: {file_lines[f_next]!r}."
            )
        else:
            message += f"\nThe next line you gave, {wanted[w_next]!r}, is past the end of the file."
    if w_start > 0:
        message += (
            f"\nThe line you gave before them, {wanted[w_start - 1]!r}, does not stand"
            f" just before them in the file."
        )
    return message


# --- through a kernel ---------------------------------------------------------------------------


def edit_file(kernel: Kernel, request: EditRequest) -> EditOutcome:
    """Apply an edit to a file in the kernel's box (relative paths: the kernel's directory).

    A file that does not exist is an error, as in the reference: an edit never creates a file;
    so is, at once, a file that is not a regular file or is larger than the kernel's read bound
    (4 MB, `file_access`). The file is read and written as bytes; bytes that are not UTF-8
    survive on every line the edit does not touch (they are carried as surrogate escapes and
    written back unchanged).
    """
    try:
        data = kernel.read_bytes(request.file)
    except FileNotFoundError:
        return EditOutcome(
            False,
            f"Edit failed: file not found: {request.file} (relative paths start at the current"
            " directory; check it with `%pwd` and `!ls`). An edit changes an existing file; to"
            " create one, write it with a cell (for example `%%writefile`).",
            None,
        )
    except OSError as exc:  # a directory, too large, a FIFO or device, no permission: the
        # agent can act on it (the kernel refuses at once what is not a regular file of at
        # most 4 MB: a 40 MB file, a FIFO or /dev/zero was a kernel error)
        return EditOutcome(
            False,
            f"Edit failed: cannot read {request.file}: {exc}. The edit tool changes regular "
            "text files of at most 4,000,000 bytes; change other files with shell commands "
            "(sed -i, a %%writefile cell).",
            None,
        )
    text = data.decode("utf-8", "surrogateescape")
    outcome = apply_edit(text, request)
    message = _printable(outcome.message)
    if outcome.ok and outcome.new_text is not None:
        try:
            kernel.write_bytes(request.file, outcome.new_text.encode("utf-8", "surrogateescape"))
        except OSError as exc:
            return EditOutcome(False, f"Edit failed: cannot write {request.file}: {exc}", None)
    return EditOutcome(outcome.ok, message, outcome.new_text)


def _printable(message: str) -> str:
    """Feedback text without surrogate escapes (bytes of a non-UTF-8 file show as U+FFFD), so
    it can be sent to a model and saved as UTF-8."""
    return message.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def edit_action(kernel: Kernel, content: str) -> EditOutcome:
    """An agent's `edit` action: parse SUPER's edit format and apply it; a malformed edit is a
    failed outcome whose message shows the format."""
    try:
        request = parse_edit(content)
    except EditFormatError as exc:
        return EditOutcome(False, str(exc), None)
    return edit_file(kernel, request)
