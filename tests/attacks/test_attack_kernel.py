"""Round three of attacks from task code (issue 24): a cell's shell command that reads stdin must
not hold the cell for its whole timeout. On the real engine, and on the local backend."""

from __future__ import annotations

import time
import uuid
from contextlib import nullcontext

import pytest

from pytest_super.kernels import provision_kernel
from pytest_super.kernels.base import KernelSettings

#: cells whose command reads stdin; each must end at once with end-of-file
READERS = {
    "!read x; echo read-status=$?": "read-status=1",
    "!python3 -c 'input()'": "EOFError",
    "!cat; echo cat-done": "cat-done",
    "import subprocess\nprint(subprocess.run(['cat']).returncode)": "0",
}
CELL_TIMEOUT_S = 20.0
#: well under the cell timeout: on this 2-core machine a cell like these takes 0.1 s
QUICK_S = 5.0


@pytest.fixture(params=["docker", "local"])
def kernel(request: pytest.FixtureRequest):
    if request.param == "docker":
        request.getfixturevalue("image")  # built (offline) when missing
        settings = KernelSettings(
            run_id=f"test-{uuid.uuid4().hex[:10]}", mem="1g", cpus=1.0, startup_timeout_s=60
        )
    else:
        settings = KernelSettings(backend="local")
    local = request.param == "local"
    with pytest.warns(UserWarning, match="isolates nothing") if local else nullcontext():
        k = provision_kernel(settings, task_id="stdin-reader")
    yield k
    k.close()


def _check_readers(kernel) -> None:
    for code, expected in READERS.items():
        started = time.monotonic()
        result = kernel.execute(code, timeout=CELL_TIMEOUT_S)
        took = time.monotonic() - started
        assert took < QUICK_S, f"{code!r} took {took:.1f} s: {result.output[-300:]!r}"
        assert result.status in ("ok", "error") and expected in result.output, (code, result)


def test_a_shell_command_reading_stdin_gets_end_of_file_at_once(kernel) -> None:
    """Red on 636b730: `!read x` and `!python -c "input()"` waited the whole cell timeout (the
    command's stdin was IPython's pseudo-terminal)."""
    _check_readers(kernel)
    kernel.restart()  # a restarted kernel closes stdin again
    _check_readers(kernel)
