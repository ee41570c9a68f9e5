"""SWE-agent's agent-computer interface, adapted to a notebook kernel: the file viewer and commands.

Owns the commands `open`, `goto`, `scroll_up`, `scroll_down`, `create`, `edit <start>:<end>` ...
`end_of_edit`, `search_dir`, `search_file`, `find_file` and `submit`, as plain code that needs a
`Kernel` and no model:

- `parse_command(text)` turns the text of a reply's command block into a `Command` (anything that is
  not a special command is a notebook cell, action `execute`), or raises `CommandFormatError`;
- `FileViewer` keeps the open file and the window shown (100 lines) and runs the commands in the
  kernel. Files are read and written with the kernel's `read_file` / `write_file`; the current
  directory, file lookups and searches run as small snippets in the kernel (in a throwaway
  namespace), so relative paths follow the kernel's `%cd`. Snippets run through `run_cell` (the
  agent passes the environment's, so their time counts against the compute limit); output that
  is not the snippet's own (late output of the previous cell) is kept in `stray_output` for the
  agent to record. A snippet's result is bounded (long lines are cut) so the output cap never
  cuts it; a result that is cut anyway is an error message, not a crash.
- an edit of a Python file is linted on the controller (`swe_lint`, flake8): an edit that
  introduces new errors is not applied, and the errors are shown.

Every command returns the text shown to the model; mistakes the model can fix (a missing file, a line
out of range, an edit that introduces lint errors) are messages, never exceptions.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from pytest_super.agents.swe_lint import LintError, lint_errors, new_errors
from pytest_super.kernels.inside import kernel_module
from pytest_super.kernels.inside.swe_kernel_tools import (
    MARKER,
    DirHits,
    FileHits,
    FoundFiles,
    Stat,
)
from pytest_super.prompts import ours as ours_prompts
from pytest_super.trajectory import Action

if TYPE_CHECKING:
    from pytest_super.kernels.base import CellResult, Kernel

WINDOW = 100
#: lines kept from the previous window when scrolling
SCROLL_OVERLAP = 2
#: at most this many files (search_dir, find_file) or lines (search_file) are listed
MAX_RESULTS = 100
#: a matching line longer than this is cut in search_file's listing (SWE-agent's 100-line window
#: shows far less; the bound keeps a snippet's result well under any sensible output cap)
MAX_LINE_CHARS = 2000
END_OF_EDIT = "end_of_edit"
#: the first line of the viewer's window: the file it shows, which the state prompt names
FILE_HEADER = re.compile(r"^\[File: (.+) \(\d+ lines total\)\]$", re.MULTILINE)

#: command name -> (signature, what it does, its arguments as (name, type, required, meaning));
#: the system prompt lists them in this order, in the published SWE-agent episodes' layout
COMMAND_DOCS: dict[Action, tuple[str, str, tuple[tuple[str, str, bool, str], ...]]] = {
    Action.OPEN: (
        "open <path> [<line_number>]",
        "opens the file at path in the viewer; with line_number, the window moves to show that line",
        (
            ("path", "string", True, "the path of the file to open"),
            (
                "line_number",
                "integer",
                False,
                "the line to show (without it, the window starts at the top of the file)",
            ),
        ),
    ),
    Action.CREATE: (
        "create <filename>",
        "creates a new, empty file with the given name and opens it",
        (("filename", "string", True, "the name of the file to create"),),
    ),
    Action.GOTO: (
        "goto <line_number>",
        "moves the window so that it shows <line_number>",
        (("line_number", "integer", True, "the line to move the window to"),),
    ),
    Action.SCROLL_DOWN: (
        "scroll_down",
        f"moves the window down {WINDOW - SCROLL_OVERLAP} lines",
        (),
    ),
    Action.SCROLL_UP: ("scroll_up", f"moves the window up {WINDOW - SCROLL_OVERLAP} lines", ()),
    Action.SUBMIT: (
        "submit <answer>",
        "submits your final answer (JSON, as the task asks); this ends the task",
        (("answer", "string", True, "the answer to submit"),),
    ),
    Action.SEARCH_DIR: (
        "search_dir <search_term> [<dir_path>]",
        "searches for search_term in all files under dir_path (default: the current directory)",
        (
            ("search_term", "string", True, "the text to search for"),
            ("dir_path", "string", False, "the directory to search in (default: current)"),
        ),
    ),
    Action.SEARCH_FILE: (
        "search_file <search_term> [<file>]",
        "searches for search_term in file (default: the open file)",
        (
            ("search_term", "string", True, "the text to search for"),
            ("file", "string", False, "the file to search in (default: the open file)"),
        ),
    ),
    Action.FIND_FILE: (
        "find_file <file_name> [<dir_path>]",
        "finds the files called file_name (wildcards allowed) under dir_path (default: the "
        "current directory)",
        (
            ("file_name", "string", True, "the name of the file to look for"),
            ("dir_path", "string", False, "the directory to search in (default: current)"),
        ),
    ),
    Action.EDIT: (
        f"edit <start_line>:<end_line>\n<replacement_text>\n{END_OF_EDIT}",
        # the edit-tool description: prompts/swe_edit_command.txt (a run's own: --super-prompts)
        ours_prompts().swe_edit_doc(end_of_edit=END_OF_EDIT),
        (
            ("start_line", "integer", True, "the first line to replace"),
            ("end_line", "integer", True, "the last line to replace (inclusive)"),
            ("replacement_text", "string", True, "the text that replaces those lines"),
        ),
    ),
}
SPECIAL_COMMANDS = frozenset(COMMAND_DOCS)
#: the words that start a command rather than a cell (with the timeout protocol's answers)
_CONTROL_WORDS = SPECIAL_COMMANDS | {Action.WAIT, Action.INTERRUPT}
#: viewer commands the paper's SWE-agent took as commands when written as a call,
#: `search_file("x")` (it ran them, and the shell refused the parenthesis); `open(` stays
#: Python's built-in
_CALLED_COMMANDS = frozenset(
    {
        Action.GOTO,
        Action.SCROLL_UP,
        Action.SCROLL_DOWN,
        Action.CREATE,
        Action.SEARCH_DIR,
        Action.SEARCH_FILE,
        Action.FIND_FILE,
    }
)
_CALL = re.compile(r"^(\w+)\(")


class CommandFormatError(ValueError):
    """The command block cannot be run as it stands; the message tells the model how to fix it."""


@dataclass(frozen=True)
class Command:
    """One parsed command. `name` is a special command or `execute` (a notebook cell).

    `args` are the words after the name (shell-style quoting); `body` is what follows the first
    line: the replacement lines of an edit, the JSON of a submit, the code of a cell.
    """

    name: Action
    args: tuple[str, ...]
    body: str
    text: str  # the whole command as the model wrote it
    #: what is wrong with a command that cannot run as written (the viewer answers with it)
    malformed: str = ""


def parse_command(text: str) -> Command:
    """Parse the text of one command block. Raises CommandFormatError for what cannot be run."""
    text = text.strip("\n")
    if not text.strip():
        raise CommandFormatError("the command block is empty.")
    first, _, rest = text.partition("\n")
    word, _, arg_text = first.strip().partition(" ")
    call = _CALL.match(first.strip())
    if call is not None and call[1] in _CALLED_COMMANDS:
        return Command(
            Action(call[1]),
            (),
            "",
            text,
            malformed=f"`{call[1]}` is a command, not a function: write it without parentheses.",
        )
    if word == Action.EDIT and not any(line.strip() == END_OF_EDIT for line in rest.split("\n")):
        # an edit without its terminator is no command: the paper's SWE-agent ran it as a cell
        return Command(Action.EXECUTE, (), text, text)
    # `open = ...` or `interrupt (x)` is Python that happens to start with a command's name
    if word not in _CONTROL_WORDS or arg_text.lstrip().startswith(("=", "(")):
        return Command(Action.EXECUTE, (), text, text)
    if word in (Action.WAIT, Action.INTERRUPT):
        if arg_text.strip() or rest.strip():
            raise CommandFormatError(f"`{word}` takes no arguments and must stand alone.")
        return Command(Action(word), (), "", text)
    if word == Action.SUBMIT:
        # any text is taken, as by the paper's SWE-agent: text that is not JSON scores 0
        payload = (arg_text + "\n" + rest).strip()
        if not payload:
            raise CommandFormatError('`submit` needs the answer as JSON, e.g. submit {"f1": 0.5}')
        return Command(Action.SUBMIT, (), payload, text)
    args = _split_args(arg_text)
    if word == Action.EDIT:
        lines = rest.split("\n") if rest else []
        ends = [i for i, line in enumerate(lines) if line.strip() == END_OF_EDIT]
        after = "\n".join(lines[ends[0] + 1 :]).strip()
        if after:
            raise CommandFormatError(
                f"there is text after `{END_OF_EDIT}`. Send one command per reply; the edit must be "
                "the last thing in its block."
            )
        return Command(Action.EDIT, args, "\n".join(lines[: ends[0]]), text)
    if rest.strip():
        raise CommandFormatError(
            f"`{word}` takes one line, but the block has more lines. Send exactly one command per "
            "reply and wait for its output before the next one."
        )
    return Command(Action(word), args, "", text)


def _split_args(arg_text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(arg_text))
    except ValueError:  # unbalanced quotes: take the words as they are
        return tuple(arg_text.split())


class KernelSnippetError(RuntimeError):
    """A helper snippet failed in the kernel (timeout, dead kernel, or an exception)."""


class FileViewer:
    """The open file, the window shown, and the commands that act on files through a kernel.

    `kernel` may be replaced between commands (a new attempt starts a new kernel); the viewer's
    state is only the open file's absolute path and the first line shown.
    """

    def __init__(
        self,
        kernel: Kernel,
        *,
        window: int = WINDOW,
        snippet_timeout_s: float = 120.0,
        run_cell: Callable[[str, float], CellResult] | None = None,
    ):
        self.kernel = kernel
        self.window = window
        self.snippet_timeout_s = snippet_timeout_s
        self.open_file: str | None = None
        self.first_line = 1
        #: runs a snippet as a cell (code, timeout); default: the kernel's execute, uncounted
        self.run_cell = run_cell
        #: output that came with snippets but was not theirs (late output of earlier cells)
        self.stray_output = ""

    def take_stray_output(self) -> str:
        """The stray output collected since the last call (and forget it)."""
        text, self.stray_output = self.stray_output, ""
        return text

    # -- dispatch ----------------------------------------------------------------------------
    def run(self, command: Command) -> str:
        """Run one special command (not submit, not a cell) and return what the model is shown."""
        handler: Callable[[Command], str] | None = getattr(self, f"_cmd_{command.name}", None)
        if handler is None:
            raise ValueError(f"{str(command.name)!r} is not a file viewer command")
        if command.malformed:
            return f"Error: {command.malformed}\n{_usage(command.name)}"
        try:
            return handler(command)
        except KernelSnippetError as exc:
            return f"Error: `{command.name}` could not run in the kernel: {exc}"
        except OSError as exc:  # read_file / write_file: permissions, a directory, bad encoding
            return f"Error: `{command.name}` failed: {exc}"

    def _cmd_open(self, command: Command) -> str:
        if not command.args or len(command.args) > 2:
            return _usage(Action.OPEN)
        line = None
        if len(command.args) == 2:
            line = _parse_int(command.args[1])
            if line is None:
                return f"Error: <line_number> must be a number, not {command.args[1]!r}\n" + _usage(
                    Action.OPEN
                )
        return self.open(command.args[0], line)

    def _cmd_goto(self, command: Command) -> str:
        line = _parse_int(command.args[0]) if len(command.args) == 1 else None
        return _usage(Action.GOTO) if line is None else self.goto(line)

    def _cmd_scroll_up(self, command: Command) -> str:
        return self.scroll(-1) if not command.args else _usage(Action.SCROLL_UP)

    def _cmd_scroll_down(self, command: Command) -> str:
        return self.scroll(+1) if not command.args else _usage(Action.SCROLL_DOWN)

    def _cmd_create(self, command: Command) -> str:
        return self.create(command.args[0]) if len(command.args) == 1 else _usage(Action.CREATE)

    def _cmd_edit(self, command: Command) -> str:
        match = re.fullmatch(r"(\d+):(\d+)", command.args[0]) if len(command.args) == 1 else None
        if match is None:
            return "Error: the line range must look like 12:15\n" + _usage(Action.EDIT)
        body = command.body
        replacement = body.split("\n") if body else []
        return self.edit(int(match[1]), int(match[2]), replacement)

    def _cmd_search_dir(self, command: Command) -> str:
        if not 1 <= len(command.args) <= 2:
            return _usage(Action.SEARCH_DIR)
        return self.search_dir(*command.args)

    def _cmd_search_file(self, command: Command) -> str:
        if not 1 <= len(command.args) <= 2:
            return _usage(Action.SEARCH_FILE)
        return self.search_file(*command.args)

    def _cmd_find_file(self, command: Command) -> str:
        if not 1 <= len(command.args) <= 2:
            return _usage(Action.FIND_FILE)
        return self.find_file(*command.args)

    # -- the viewer --------------------------------------------------------------------------
    def cwd(self) -> str:
        """The kernel's current directory."""
        return str(self._snippet("cwd", {}))

    def open(self, path: str, line: int | None = None) -> str:
        info = cast(Stat, self._snippet("stat", {"path": path}))
        if not info["exists"]:
            return f"Error: file {path} not found (relative paths start at {info['cwd']})."
        if info["is_dir"]:
            return f"Error: {path} is a directory. Use `!ls {path}` to list it, then open a file."
        lines = self._read_lines(info["abs"])
        if line is not None and not 1 <= line <= max(1, len(lines)):
            return f"Error: <line_number> must be between 1 and {len(lines)} (the file's length)."
        self.open_file = info["abs"]
        self.first_line = 1 if line is None else line - self.window // 2
        return self._render(lines)

    def goto(self, line: int) -> str:
        if self.open_file is None:
            return "Error: no file is open. Use `open <path>` first."
        lines = self._read_lines(self.open_file)
        if not 1 <= line <= max(1, len(lines)):
            return f"Error: <line_number> must be between 1 and {len(lines)} (the file's length)."
        self.first_line = line - self.window // 6
        return self._render(lines)

    def scroll(self, direction: int) -> str:
        if self.open_file is None:
            return "Error: no file is open. Use `open <path>` first."
        lines = self._read_lines(self.open_file)
        self.first_line += direction * (self.window - SCROLL_OVERLAP)
        return self._render(lines)

    def create(self, path: str) -> str:
        info = cast(Stat, self._snippet("stat", {"path": path}))
        if info["exists"]:
            shown = self.open(path)
            return f"Error: file {path} already exists; it is open now.\n{shown}"
        self._snippet("mkdir_parent", {"path": info["abs"]})
        self.kernel.write_file(info["abs"], "\n")
        return self.open(info["abs"])

    def edit(self, start: int, end: int, replacement: list[str]) -> str:
        """Replace lines start..end (1-based, inclusive) of the open file with `replacement`.

        `end == start - 1` inserts before `start`. A Python file that compiled before the edit must
        compile after it, else the file is left unchanged and the error is shown.
        """
        if self.open_file is None:
            return "Error: no file is open. Use `open <path>` or `create <path>` first."
        path = self.open_file
        lines = self._read_lines(path)
        total = len(lines)
        if not 1 <= start <= total + 1:
            return (
                f"Error: start_line must be between 1 and {total + 1} (the file has {total} lines)."
            )
        if not start - 1 <= end <= total:
            return (
                f"Error: end_line must be between start_line - 1 ({start - 1}, to insert) and "
                f"{total} (the file's length); got {end}."
            )
        new_lines = lines[: start - 1] + replacement + lines[end:]
        new_text = "".join(line + "\n" for line in new_lines)
        if path.endswith(".py"):
            old_text = "".join(line + "\n" for line in lines)
            introduced = new_errors(
                lint_errors(old_text, path),
                lint_errors(new_text, path),
                start,
                end,
                len(replacement),
            )
            if introduced:
                return self._rejected_edit(lines, new_lines, start, introduced)
        self.kernel.write_file(path, new_text)
        self.first_line = start - self.window // 2 + len(replacement) // 2
        return (
            self._render(new_lines)
            + "\nFile updated. Check the lines above: indentation, duplicated or missing lines. "
            "Edit again if something is wrong."
        )

    def _rejected_edit(
        self, old: list[str], new: list[str], start: int, errors: list[LintError]
    ) -> str:
        self.first_line = start - self.window // 2
        would_be = self._render(new)
        self.first_line = start - self.window // 2
        original = self._render(old)
        listing = "\n".join(str(error) for error in errors)
        return (
            "Your edit was NOT applied: it introduces new error(s) in the file. Read them "
            "carefully, then edit again.\n\n"
            f"ERRORS:\n{listing}\n\n"
            "This is how the file would have looked with your edit:\n"
            f"-------------------------------------------------\n{would_be}\n"
            "-------------------------------------------------\n\n"
            "This is the file as it still is:\n"
            f"-------------------------------------------------\n{original}\n"
            "-------------------------------------------------\n"
            "Fix the line range or the replacement lines (mind the indentation) and edit again; "
            "the same edit will fail the same way."
        )

    # -- searching ---------------------------------------------------------------------------
    def search_dir(self, term: str, directory: str = ".") -> str:
        found = cast(
            DirHits,
            self._snippet(
                "search_dir", {"term": term, "directory": directory, "limit": MAX_RESULTS}
            ),
        )
        if found["error"]:
            return f"Error: {found['error']}"
        files = found["files"]
        if not files:
            return f'No matches found for "{term}" in {found["abs"]}'
        if len(files) > MAX_RESULTS:
            return (
                f'More than {MAX_RESULTS} files matched for "{term}" in {found["abs"]}. '
                "Narrow the search (a longer term or a subdirectory)."
            )
        total = sum(count for _, count in files)
        listing = "\n".join(f"{name} ({count} matches)" for name, count in files)
        return (
            f'Found {total} matches for "{term}" in {found["abs"]}:\n{listing}\n'
            f'End of matches for "{term}" in {found["abs"]}'
        )

    def search_file(self, term: str, file: str | None = None) -> str:
        if file is None:
            if self.open_file is None:
                return "Error: no file is open. Name a file: search_file <search_term> <file>"
            file = self.open_file
        found = cast(
            FileHits,
            self._snippet(
                "search_file",
                {"term": term, "path": file, "limit": MAX_RESULTS, "max_chars": MAX_LINE_CHARS},
            ),
        )
        if found["error"]:
            return f"Error: {found['error']}"
        hits = found["lines"]
        if not hits:
            return f'No matches found for "{term}" in {found["abs"]}'
        if len(hits) > MAX_RESULTS:
            return (
                f'More than {MAX_RESULTS} lines matched for "{term}" in {found["abs"]}. '
                "Narrow the search."
            )
        listing = "\n".join(f"Line {number}:{text}" for number, text in hits)
        return (
            f'Found {len(hits)} matches for "{term}" in {found["abs"]}:\n{listing}\n'
            f'End of matches for "{term}" in {found["abs"]}'
        )

    def find_file(self, name: str, directory: str = ".") -> str:
        found = cast(
            FoundFiles,
            self._snippet(
                "find_file", {"name": name, "directory": directory, "limit": MAX_RESULTS}
            ),
        )
        if found["error"]:
            return f"Error: {found['error']}"
        paths = found["paths"]
        if not paths:
            return f'No matches found for "{name}" in {found["abs"]}'
        if len(paths) > MAX_RESULTS:
            return (
                f'More than {MAX_RESULTS} files named "{name}" in {found["abs"]}. '
                "Narrow the search (a subdirectory or a more precise name)."
            )
        listing = "\n".join(paths)
        return (
            f'Found {len(paths)} matches for "{name}" in {found["abs"]}:\n{listing}\n'
            f'End of matches for "{name}" in {found["abs"]}'
        )

    # -- internals ---------------------------------------------------------------------------
    def _read_lines(self, path: str) -> list[str]:
        text = self.kernel.read_file(path)
        if not text:
            return []
        if text.endswith("\n"):
            text = text[:-1]
        return text.split("\n")

    def _render(self, lines: list[str]) -> str:
        """The window at `first_line` (clamped to the file), SWE-agent's viewer format."""
        total = len(lines)
        self.first_line = max(1, min(self.first_line, total - self.window + 1))
        last = min(total, self.first_line + self.window - 1)
        shown = [f"[File: {self.open_file} ({total} lines total)]"]
        if self.first_line > 1:
            shown.append(f"({self.first_line - 1} more lines above)")
        shown.extend(f"{n}:{lines[n - 1]}" for n in range(self.first_line, last + 1))
        if total > last:
            shown.append(f"({total - last} more lines below)")
        return "\n".join(shown)

    def _snippet(self, name: str, args: Mapping[str, object]) -> object:
        """Run one of the helpers of `swe_kernel_tools` in the kernel; return its JSON result (of
        the helper's type: `Stat`, `DirHits`, ...)."""
        code = kernel_snippet(name, args)
        if self.run_cell is not None:
            result = self.run_cell(code, self.snippet_timeout_s)
        else:
            result = self.kernel.execute(code, self.snippet_timeout_s, interrupt_on_timeout=True)
        lines = result.output.split("\n")
        marked = [i for i, line in enumerate(lines) if line.startswith(MARKER)]
        if marked:
            found = lines.pop(marked[-1])
            rest = "\n".join(lines)
            if rest.strip():  # output that came with the snippet but was not its own
                self.stray_output += rest
            try:
                return json.loads(found[len(MARKER) :])
            except json.JSONDecodeError:
                raise KernelSnippetError(
                    "its result was cut by the kernel's output cap; narrow it (a longer search "
                    "term, a subdirectory)"
                ) from None
        if result.status == "timeout":
            raise KernelSnippetError(
                f"it took more than {self.snippet_timeout_s:.0f} s and was stopped; "
                "narrow it (a smaller directory)"
            )
        raise KernelSnippetError(f"({result.status}) {result.output.strip()[-1000:]}")


def kernel_snippet(name: str, args: Mapping[str, object]) -> str:
    """The cell that runs one of the viewer's helpers (`swe_kernel_tools`) in the kernel, loaded
    there once out of the user's namespace (`kernels.inside`); it prints its JSON result."""
    tools = kernel_module("pytest_super.kernels.inside", "swe_kernel_tools.py")
    return f"{tools}.run({name!r}, {json.dumps(args)!r})"


def command_docs(*, edit_doc: str | None = None) -> str:
    """The command list for the system prompt: docstring, signature and arguments of each;
    `edit_doc`: the edit command's docstring (the run's prompt set's edit-tool description)."""
    blocks = []
    for name, (signature, doc, arguments) in COMMAND_DOCS.items():
        if name == Action.EDIT and edit_doc is not None:
            doc = edit_doc
        block = [f"{name}:", f"  docstring: {doc}", f"  signature: {signature}"]
        if arguments:
            block.append("  arguments:")
            block += [
                f"    - {arg} ({kind}) [{'required' if required else 'optional'}]: {meaning}"
                for arg, kind, required, meaning in arguments
            ]
        blocks.append("\n".join(block))
    return "\n\n".join(blocks)


def _usage(name: Action) -> str:
    return f"Usage: {COMMAND_DOCS[name][0]}"


def _parse_int(text: str) -> int | None:
    return int(text) if re.fullmatch(r"\d+", text) else None
