"""SUPER's script-executed metric (the Auto set): did a cell run the task's entrypoint, for long
enough and without an error? `runs_entrypoint` reads a cell's shell lines and Python calls."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_super.trajectory import Step

SCRIPT_MIN_DURATION_S = 10.0
SCRIPT_SUFFIXES = (".py", ".sh", ".bash")


@dataclass(frozen=True)
class ExecutedCell:
    """One cell run in the episode, as the script-executed metric sees it."""

    code: str
    output: str
    duration_s: float


def executed_cells(steps: Iterable[Step]) -> list[ExecutedCell]:
    """The steps that ran code in the kernel, as script-executed sees them (pre-executed cells
    included, as in the reference, whose environment history holds them too)."""
    return [
        ExecutedCell(code=s.code, output=s.output, duration_s=s.duration_s)
        for s in steps
        if s.code is not None
    ]


#: interpreters given the script as their first argument that is not an option
_PYTHON = re.compile(r"(?:python|pypy|ipython)[\d.]*")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "source", "."})
#: launchers given the script as their first argument that is a script file
_LAUNCHERS = frozenset({"torchrun", "deepspeed", "horovodrun"})
_LAUNCHER_MODULES = frozenset(
    {"torch.distributed.launch", "torch.distributed.run", "accelerate.commands.launch"}
)
#: commands that run the command after them (their options and numbers are skipped)
_WRAPPERS = frozenset(
    {"nohup", "time", "env", "exec", "nice", "ionice", "sudo", "timeout", "stdbuf", "command"}
)
_WRAPPER_ARGUMENT = re.compile(r"-.*|[\d.]+[smhd]?")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: a Python line that runs a shell command: os.system, subprocess.*, os.popen, getoutput
_PYTHON_SHELL_CALL = re.compile(
    r"\b(?:system|popen|Popen|run|call|check_call|check_output|getoutput|getstatusoutput)\s*\("
)
_STRING_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'" + r'|"((?:[^"\\]|\\.)*)"')
_SHELL_CELL = re.compile(r"%%(?:bash|sh|shell|script\s+(?:bash|sh))\b")
_SEPARATOR = re.compile(r"[;&|()]+")


def _shell_lines(code: str) -> list[str]:
    """The shell command lines a cell runs: `!` lines (and `x = !cmd`), every line of a
    `%%bash`/`%%sh` cell, `%run` as `python`, and the string arguments of a Python line calling
    os.system, subprocess or os.popen. Comments and other magics (`%cd`) run nothing."""
    lines = code.replace("\\\n", " ").split("\n")
    if lines and _SHELL_CELL.match(lines[0].strip()):
        return lines[1:]
    found = []
    for line in (ln.strip() for ln in lines):
        shell = re.match(r"(?:[\w.]+\s*=\s*)?!+(.*)", line)
        if shell:
            found.append(shell[1])
        elif line.startswith("%run "):
            found.append("python " + line[len("%run ") :])
        elif line and line[0] not in "%#" and _PYTHON_SHELL_CALL.search(line):
            literals = _STRING_LITERAL.findall(line)
            found.append(" ".join(single or double for single, double in literals))
    return found


def _simple_commands(line: str) -> list[list[str]]:
    """A shell line's simple commands (split at `;`, `&&`, `||`, `|`, `&`, parentheses) as
    words, redirections and their targets left out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: the shell would refuse it too; read the words
        tokens = line.split()
    commands: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
        elif "<" in token or ">" in token:
            skip_next = True  # `> log.txt`, `2>&1`: the target is no argument
        elif _SEPARATOR.fullmatch(token):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def _names_file(word: str, name: str) -> bool:
    return os.path.basename(word) == name


def _first_script(args: list[str], name: str) -> bool:
    """A launcher's script: its first argument that is a script file."""
    script = next((a for a in args if not a.startswith("-") and a.endswith(SCRIPT_SUFFIXES)), "")
    return _names_file(script, name)


def _python_runs(args: list[str], name: str, modules: frozenset[str]) -> bool:
    """Does `python <args>` run the script `name` (or its module, with `-m`)?"""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-m"):
            module = arg[2:] or (args[i + 1] if i + 1 < len(args) else "")
            if module in _LAUNCHER_MODULES:
                return _first_script(args[i + 1 :], name)
            return module in modules
        if arg.startswith("-c") or arg == "-":
            return False  # code given on the command line or standard input: not the file
        if not arg.startswith("-"):
            return _names_file(arg, name)
        i += 2 if arg in ("-W", "-X", "-Q") else 1
    return False


def _shell_runs(args: list[str], name: str, modules: frozenset[str], depth: int) -> bool:
    """Does `bash <args>` run the script `name` (or, with `-c`, a command that does)?"""
    for i, arg in enumerate(args):
        if arg == "-c":
            text = args[i + 1] if i + 1 < len(args) else ""
            return depth < 3 and _line_runs(text, name, modules, depth + 1)
        if not arg.startswith(("-", "+")) and args[i - 1 : i] not in (["-o"], ["+o"]):
            return _names_file(arg, name)
    return False


def _command_runs(words: list[str], name: str, modules: frozenset[str], depth: int) -> bool:
    """Does one simple command run the entrypoint: an interpreter or launcher given the file
    (after variable assignments and wrappers such as nohup, env, timeout), or the file itself
    by its path (`./run.sh`)? A reader or editor given the file (cat, sed -n, vim) does not."""
    i = 0
    while i < len(words) and (_ASSIGNMENT.match(words[i]) or words[i] in _WRAPPERS):
        wrapper = words[i] in _WRAPPERS
        i += 1
        while wrapper and i < len(words) and _WRAPPER_ARGUMENT.fullmatch(words[i]):
            i += 1
    if i >= len(words):
        return False
    program, args = os.path.basename(words[i]), words[i + 1 :]
    if _PYTHON.fullmatch(program):
        return _python_runs(args, name, modules)
    if program in _SHELLS:
        return _shell_runs(args, name, modules, depth)
    if program in _LAUNCHERS or (program == "accelerate" and args[:1] == ["launch"]):
        return _first_script(args, name)
    return "/" in words[i] and _names_file(words[i], name)


def _line_runs(line: str, name: str, modules: frozenset[str], depth: int = 0) -> bool:
    return any(_command_runs(c, name, modules, depth) for c in _simple_commands(line))


def runs_entrypoint(entrypoint: str, code: str) -> bool:
    """Whether a cell's code runs the entrypoint, as the paper defines it: an interpreter or
    launcher given the file (`python`, `python -m <module>`, `bash`/`sh`, `accelerate launch`,
    `torchrun`, `deepspeed`, `%run`, `./run.sh`), with or without `cd ... &&`, `nohup`, variable
    assignments or redirections. The file is its name exactly (`train.py.bak`, `train.pyc` and
    `train.py~` are other files); a module is its path or a dotted tail of it (`src.train` or
    `train` for `src/train.py`, as the cell may have changed directory first). Naming the file to
    a reader or editor (`cat`, `head`, `grep`, `sed -n`, `vim`) runs nothing.
    """
    name = os.path.basename(entrypoint)
    modules: frozenset[str] = frozenset()
    if entrypoint.endswith(".py"):
        parts = [p for p in entrypoint[: -len(".py")].split("/") if p not in ("", ".")]
        modules = frozenset(".".join(parts[i:]) for i in range(len(parts)))
    return any(_line_runs(line, name, modules) for line in _shell_lines(code))


def score_script_executed(entrypoint: str | None, cells: Iterable[ExecutedCell]) -> float | None:
    """SUPER's Auto metric: 1.0 if a cell ran the entrypoint for >= 10 s without error, else 0.0.

    A cell "ran the entrypoint" when it runs the file (`runs_entrypoint`: an interpreter or
    launcher given it, not a reader or editor); "without error" means its output has neither
    `Traceback` nor `<file name>: error` (argparse misuse). None when there is no entrypoint or it is not a
    .py, .sh or .bash file.
    """
    if not entrypoint or not entrypoint.endswith(SCRIPT_SUFFIXES):
        return None
    name = os.path.basename(entrypoint)
    for cell in cells:
        if not runs_entrypoint(entrypoint, cell.code):
            continue
        if cell.duration_s < SCRIPT_MIN_DURATION_S:
            continue
        if "Traceback" in cell.output or f"{name}: error" in cell.output:
            continue
        return 1.0
    return 0.0
