"""The SWE-agent's edit lint, as the SUPER paper's SWE-agent ran it: flake8 with F821 (undefined
name), E111-E113 (indentation) and E999 (syntax error).

Owns `lint_errors` (flake8 on a text) and `new_errors` (the errors an edit introduces). flake8 runs
here, on the controller, over the file's text before and after the edit as read from the kernel:
it never enters the task's own Python environment, so the agent's `pip list` stays as the image
has it. An edit is rejected when it introduces an error the file did not have before; an error
the file already had (its line moved by the edit's change in length) does not count.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

#: the codes the paper's SWE-agent checked; its published episodes (trajectories/
#: gpt-4o-2024-08-06_swe-agent_expert) show 222 edits rejected with F821 and E999 errors
LINT_CODES = ("F821", "E111", "E112", "E113", "E999")
#: flake8 on one file takes about 0.3 s here; a minute means flake8 is stuck, not slow
LINT_TIMEOUT_S = 60.0


class LintUnavailable(RuntimeError):
    """flake8 could not run on the controller (a broken installation of pytest-super)."""


@dataclass(frozen=True)
class LintError:
    line: int
    code: str
    text: str

    def __str__(self) -> str:
        return f"- {self.code} {self.text}"


def lint_errors(text: str, name: str) -> list[LintError]:
    """flake8's errors of `LINT_CODES` in `text` (a Python file called `name`)."""
    command = [
        sys.executable,
        "-m",
        "flake8",
        "--isolated",
        f"--select={','.join(LINT_CODES)}",
        "--format=%(row)d\t%(code)s\t%(text)s",
        f"--stdin-display-name={name}",
        "-",
    ]
    try:
        done = subprocess.run(
            command, input=text, capture_output=True, text=True, timeout=LINT_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LintUnavailable(f"flake8 could not run: {exc}") from exc
    if done.returncode not in (0, 1):
        raise LintUnavailable(
            f"flake8 failed (exit {done.returncode}): {done.stderr.strip()[-500:]}; "
            "reinstall pytest-super (flake8 is one of its dependencies)"
        )
    errors = []
    for line in done.stdout.splitlines():
        row, code, message = line.split("\t", 2)
        errors.append(LintError(int(row), code, message))
    return errors


def new_errors(
    before: list[LintError], after: list[LintError], start: int, end: int, added: int
) -> list[LintError]:
    """The errors of `after` that `before` did not have, for an edit that replaced lines
    `start..end` (1-based, inclusive) with `added` lines. Errors before the edit keep their line,
    errors after it move by the change in length, errors inside it are gone."""
    shift = added - (end - start + 1)
    known = set()
    for error in before:
        if error.line < start:
            known.add((error.line, error.code, error.text))
        elif error.line > end:
            known.add((error.line + shift, error.code, error.text))
    return [e for e in after if (e.line, e.code, e.text) not in known]
