"""Runs inside the kernel: the harness's reads and writes of files there (`JupyterKernel.read_file`,
`write_file`, `read_bytes`, `write_bytes`), relative to the kernel's current directory.

Shipped as source (`shipped.kernel_module`), so it imports only the standard library. Paths and
contents travel in base64, so any bytes survive the expression and its text/plain result.
"""

from __future__ import annotations

import base64
import os


def read_base64(path_b64: str, limit: int | None = None) -> str:
    """The file's bytes (at most `limit`, all if None), base64-encoded."""
    with open(base64.b64decode(path_b64).decode(), "rb") as file:
        data = file.read() if limit is None else file.read(limit)
    return base64.b64encode(data).decode()


def write_base64(path_b64: str, data_b64: str) -> int:
    """Write the file (creating parent directories); the number of bytes written."""
    path = base64.b64decode(path_b64).decode()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as file:
        return file.write(base64.b64decode(data_b64))
