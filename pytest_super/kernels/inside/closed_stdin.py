"""Runs inside the kernel: shell commands of a cell (`!cmd`) read end-of-file from stdin.

IPython runs `!cmd` through pexpect in a pseudo-terminal, so a command that reads stdin (`!read
x`, `!python -c "input()"`, a tool asking "continue? [y/N]") waited for the whole cell timeout
(300 s by default) for an answer nobody gives. `install` makes the shell of every such command
take its stdin from /dev/null first (`exec 0</dev/null`): the command sees end-of-file at once,
and its output still goes to the terminal (progress bars draw as usual). Python's own
subprocesses already read /dev/null (the kernel's stdin), and `input()` fails at once in a kernel
without a frontend's stdin channel. Standard library only; shipped as source (`kernels.inside`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: what the shell runs before the cell's command
REDIRECT = "exec 0</dev/null\n"
_MARK = "_pytest_super_closed_stdin"


def install() -> bool:
    """Wrap the kernel shell's system call (once per kernel process); False if there is none."""
    try:
        shell_module: Any = importlib.import_module("ipykernel.zmqshell")  # Any: ipykernel, untyped
    except ImportError:
        return False
    original: Callable[[str], int] | None = getattr(shell_module, "system", None)
    if original is None:
        return False
    if getattr(original, _MARK, False):
        return True

    def system(cmd: str) -> int:
        return original(REDIRECT + cmd)

    setattr(system, _MARK, True)
    shell_module.system = system
    return True
