"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


@contextlib.contextmanager
def replacing(path: Path, *, mode: int = 0o666) -> Iterator[TextIO]:
    """A UTF-8 text file that replaces `path` when the block ends without an exception.

    It is written beside `path` and renamed over it. It is created as `open()` creates files
    (0666 less the umask, like results.jsonl), not 0600 as `tempfile.mkstemp` would; `mode=0o600`
    for a private file (a kernel's key), never readable by others even briefly.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str, *, mode: int = 0o666) -> None:
    """Write `text` to `path` through a file in the same folder and a rename."""
    with replacing(path, mode=mode) as f:
        f.write(text)
