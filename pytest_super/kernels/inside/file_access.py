"""Runs inside the kernel: the harness's reads and writes of files there (`JupyterKernel.read_file`,
`write_file`, `read_bytes`, `write_bytes`), relative to the kernel's current directory.

Shipped as source (`shipped.kernel_module`), so it imports only the standard library. Paths and
contents travel in base64, so any bytes survive the expression and its text/plain result.

Only regular files are read or written: a FIFO, a device (`/dev/zero`), a socket or a directory is
refused at once with an OSError naming what it is (a FIFO blocked the open for good, `/dev/zero`
filled the kernel's memory). A read is bounded: `MAX_BYTES` unless the caller gives a limit, and a
file larger than the bound is refused (EFBIG) without being read, never cut in silence.
"""

from __future__ import annotations

import base64
import errno
import os
import stat

#: Largest file read whole when the caller gives no limit: the same bound as the harness's
#: `MAX_READ_BYTES` (kernels/jupyter/runtime.py) for text files.
MAX_BYTES = 4_000_000
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int, path: str) -> OSError:
    if stat.S_ISDIR(mode):
        return IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return OSError(
        errno.EINVAL, f"is {kind}, not a regular file (only those are read or written)", path
    )


def _open_regular(path: str, flags: int) -> int:
    """A descriptor of `path` when it is a regular file (opened without blocking: a FIFO with
    no writer or reader, a device, would wait for good); OSError otherwise."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0), 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO no one reads, opened to write
            raise _not_regular(os.stat(path).st_mode, path) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(mode, path)
    os.set_blocking(fd, True)
    return fd


def read_base64(path_b64: str, limit: int | None = None) -> str:
    """The file's bytes (at most `limit`), base64-encoded. Without a limit, a file larger than
    MAX_BYTES raises OSError(EFBIG) before anything is read."""
    path = base64.b64decode(path_b64).decode()
    fd = _open_regular(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as file:
        bound = MAX_BYTES if limit is None else limit
        if limit is None and os.fstat(fd).st_size > MAX_BYTES:
            raise OSError(errno.EFBIG, _too_large(os.fstat(fd).st_size), path)
        data = file.read(bound + 1 if limit is None else bound)
    if limit is None and len(data) > MAX_BYTES:  # it grew while being read
        raise OSError(errno.EFBIG, _too_large(len(data)), path)
    return base64.b64encode(data).decode()


def _too_large(size: int) -> str:
    return (
        f"is {size} bytes or more, larger than {MAX_BYTES} bytes, the most a file is read whole; "
        "change it with shell commands (sed -i, head, split)"
    )


def write_base64(path_b64: str, data_b64: str) -> int:
    """Write the file (creating parent directories); the number of bytes written. A path that
    exists and is not a regular file is refused (OSError) before anything is written."""
    path = base64.b64decode(path_b64).decode()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = _open_regular(path, os.O_WRONLY | os.O_CREAT)
    with os.fdopen(fd, "wb") as file:
        file.truncate(0)  # after the check: a device or FIFO is never truncated or written
        return file.write(base64.b64decode(data_b64))
