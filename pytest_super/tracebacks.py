"""Tracebacks pytest can format. A signal (Ctrl-C, SIGTERM, pytest-timeout's SIGALRM) can
interrupt a frame at an instruction of no source line (Python 3.11+: the entry's `tb_lineno` is
None, e.g. in the clean-up code of a `with` or `finally`); pytest's formatting of such an entry
raises TypeError (`tb_lineno - 1`): at an interrupt the run ended with pytest's own traceback and
exit status 1, in a task's failure report the session ended with INTERNALERROR."""

from __future__ import annotations

from typing import Any

import pytest


def leave_out_lineless_entries(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Leave the entries of no source line out of `excinfo`'s traceback (what pytest shows)."""
    entries = excinfo.traceback
    kept = [entry for entry in entries if _has_line(entry)]
    if len(kept) < len(entries):
        excinfo.traceback = type(entries)(kept)


def _has_line(entry: Any) -> bool:  # Any: pytest's TracebackEntry, private (_pytest._code)
    try:
        entry.lineno  # noqa: B018 - computed from tb_lineno, which may be None
    except TypeError:
        return False
    return True
