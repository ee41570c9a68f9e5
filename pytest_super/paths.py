"""Paths as messages show them: relative to the working folder when they are inside it (what a
user can paste after `cd`-ing nowhere), absolute otherwise.

Records keep their own convention (results.jsonl names trajectories relative to the report
folder's parent); this is for what a person reads: failure texts, the summary, hints, the CLI's
output.
"""

from __future__ import annotations

import os
from pathlib import Path


def shown_path(path: str | os.PathLike[str]) -> str:
    """`path` relative to the working folder when it lies inside it (`.` for the folder itself),
    else absolute; a relative `path` is taken against the working folder. A working folder that
    is gone (or a path on another drive) leaves the path absolute."""
    try:
        cwd = os.getcwd()
    except OSError:  # the working folder was removed
        return os.path.abspath(path) if os.path.isabs(path) else os.fspath(path)
    absolute = os.path.abspath(os.path.join(cwd, path))
    for candidate in (absolute, os.path.realpath(absolute)):
        for base in (cwd, os.path.realpath(cwd)):
            if _inside(candidate, base):
                return os.path.relpath(candidate, base)
    return absolute


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives (Windows), or a mix of absolute and relative
        return False


#: the checkout's root when this pytest-super runs from a clone (an editable install), else the
#: folder above the installed package, which holds no Makefile or scripts/
_CHECKOUT = Path(__file__).resolve().parent.parent


def checkout_hint(command: str, needs: str) -> str:
    """` (or `command`)` when this pytest-super runs from a checkout that has `needs` (`Makefile`,
    `scripts/ensure-docker.sh`), else "": a message names a repository-only helper only to a user
    who has it, never to one who installed the wheel."""
    return f" (or `{command}`)" if (_CHECKOUT / needs).is_file() else ""
