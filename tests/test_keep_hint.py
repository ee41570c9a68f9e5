"""The --super-keep hint's `jupyter console --existing` command works as printed, from any
directory: it is this environment's own jupyter (jupyter_console is a dependency)."""

from __future__ import annotations

import shlex
import subprocess

from pytest_super.kernels.jupyter.runtime import JupyterKernel
from pytest_super.kernels.local import LocalBox


def test_the_console_command_of_a_kept_kernel_reaches_its_state(tmp_path):
    kernel = JupyterKernel(LocalBox(task_id="keep-hint"))
    kernel.execute("x = 41", 30)
    hint = kernel.detach()
    stop = next(ln for ln in hint.splitlines() if "stop:" in ln).split("stop:", 1)[1]
    try:
        line = next(ln for ln in hint.splitlines() if "console --existing" in ln)
        command = shlex.split(line.split("connect:", 1)[1])
        assert command[0].endswith("/bin/jupyter"), command  # not whatever `jupyter` is on PATH
        done = subprocess.run(
            [*command, "--simple-prompt"],
            input="print(x + 1)\nexit\n",
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},  # no venv on PATH
        )
        assert done.returncode == 0, done.stderr
        assert "42" in done.stdout, done.stdout
    finally:
        subprocess.run(stop, shell=True, check=False)
