"""Round three of attacks from task code (issue 24): a cell's shell command that reads stdin must
not hold the cell for its whole timeout. On the real engine, and on the local backend."""

from __future__ import annotations

import json
import time
import uuid
import warnings

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
#: a reader that waits for its stdin waits this whole cell timeout; a cell like these takes 0.1 s
#: on this 2-core machine (no bound near that: the machine's load decides it, issue 42)
CELL_TIMEOUT_S = 20.0


@pytest.fixture(params=["docker", "local"])
def kernel(request: pytest.FixtureRequest):
    if request.param == "docker":
        request.getfixturevalue("image")  # built (offline) when missing
        settings = KernelSettings(
            run_id=f"test-{uuid.uuid4().hex[:10]}", mem="1g", cpus=1.0, startup_timeout_s=60
        )
    else:
        settings = KernelSettings(backend="local")
    with warnings.catch_warnings():  # the local backend's warning comes once per process
        warnings.filterwarnings("ignore", "pytest-super: the local backend", UserWarning)
        k = provision_kernel(settings, task_id="stdin-reader")
    try:
        yield k
    finally:
        k.close()


def _check_readers(kernel) -> None:
    for code, expected in READERS.items():
        started = time.monotonic()
        result = kernel.execute(code, timeout=CELL_TIMEOUT_S)
        took = time.monotonic() - started
        assert took < CELL_TIMEOUT_S, f"{code!r} took {took:.1f} s: {result.output[-300:]!r}"
        assert result.status in ("ok", "error") and expected in result.output, (code, result)


def test_a_shell_command_reading_stdin_gets_end_of_file_at_once(kernel) -> None:
    """Red on 636b730: `!read x` and `!python -c "input()"` waited the whole cell timeout (the
    command's stdin was IPython's pseudo-terminal)."""
    _check_readers(kernel)
    kernel.restart()  # a restarted kernel closes stdin again
    _check_readers(kernel)


# -- 6. forged kernel messages -----------------------------------------------------------------------
FORGE_BAD_SIGNATURE = """\
from jupyter_client.session import Session
k = get_ipython().kernel
forger = Session(key=b"not-the-key", username="task")
forger.send(k.iopub_socket, "stream", {"name": "stdout", "text": "forged"}, parent=k.get_parent("shell"))
print("after-bad-signature")
"""
FORGE_INT_TEXT = """\
k = get_ipython().kernel
k.session.send(k.iopub_socket, "stream", {"name": "stdout", "text": 12345}, parent=k.get_parent("shell"))
print("after-int-text")
"""


@pytest.fixture
def docker_kernel(image: str):
    settings = KernelSettings(
        run_id=f"test-{uuid.uuid4().hex[:10]}", mem="1g", cpus=1.0, startup_timeout_s=60
    )
    k = provision_kernel(settings, task_id="forger")
    yield k
    k.close()


def test_forged_kernel_messages_are_the_cells_output_and_the_kernel_goes_on(docker_kernel) -> None:
    """Red on 636b730: a message with a bad signature and a stream whose text is a number ended
    the task as harness_error ("a bug of the harness")."""
    bad = docker_kernel.execute(FORGE_BAD_SIGNATURE, timeout=30)
    assert "not readable and was left out: ValueError: Invalid Signature" in bad.output
    assert "after-bad-signature" in bad.output and "forged" not in bad.output
    number = docker_kernel.execute(FORGE_INT_TEXT, timeout=30)
    assert "its stream text is int, not text" in number.output
    assert "after-int-text" in number.output
    assert docker_kernel.execute("print(6 * 7)", timeout=30).output == "42\n"


# -- 7. a task that breaks its own kernel's restart ---------------------------------------------------
BREAK_KERNEL = """Thought: I break the kernel.
Action: execute
<content>
import ipykernel, os, shutil
shutil.rmtree(os.path.dirname(ipykernel.__file__))
os._exit(1)
</content>
"""
TASK = """\
id: breaker
query: 'Report x as a json structured as follows: {"x": 0}.'
answer: {x: 1}
solution:
  - execute: |
      print('{"x": 1}')
"""


def test_a_task_that_breaks_its_kernels_restart_ends_once_and_is_not_retried(
    pytester: pytest.Pytester, openai_server, image: str, monkeypatch
) -> None:
    """Red on 636b730: the failed restart was an infrastructure fault, retried: the model was
    paid for three episodes. Now it is the task's outcome, kernel_error, after one."""
    monkeypatch.setenv("SUPER_API_KEY", "sk-test-key-for-the-fake-endpoint")
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    (pytester.path / "tasks" / "expert").mkdir(parents=True)
    (pytester.path / "tasks" / "expert" / "breaker.yaml").write_text(TASK)
    openai_server.script([BREAK_KERNEL] * 3)
    result = pytester.runpytest_subprocess(
        "tasks",
        "--super-agent=react",
        "--super-model=gpt-4o",
        f"--super-base-url={openai_server.base_url}",
        "--super-retries=2",
        "--super-mem=1g",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(failed=1)  # the task's doing, not an error of the harness
    assert len(openai_server.requests) == 1
    (run_dir,) = (pytester.path / "reports").iterdir()
    (line,) = (run_dir / "results.jsonl").read_text().splitlines()
    assert '"exit_status": "kernel_error"' in line and "retried_after" not in line


# -- 5. --super-disk walked around ----------------------------------------------------------------
DEEP_THEN_WRITE = """\
import os, time
start = os.getcwd()
os.chdir({root!r})
for level in range(20):  # 20 x 251 characters: past PATH_MAX (4096) from the root
    name = str(level) + "d" * 250
    os.mkdir(name)
    os.chdir(name)
{write}
os.chdir(start)
time.sleep(20)  # the watch polls every 1-5 s
print('{{"x": 1}}')
"""
#: 400 MB of data (not a sparse file: every block is written)
WRITE_400MB = """\
with open("{where}", "wb") as f:
    for _ in range(400):
        f.write(os.urandom(1 << 20))
"""


def _disk_task(task_id: str, root: str, where: str) -> str:
    code = DEEP_THEN_WRITE.format(root=root, write=WRITE_400MB.format(where=where))
    indented = "".join(f"      {line}\n" for line in code.splitlines())
    return (
        f"id: {task_id}\nquery: 'Report x as {{\"x\": 0}}.'\nanswer: {{x: 1}}\n"
        f"solution:\n  - execute: |\n{indented}"
    )


def test_the_disk_limit_holds_past_path_max_and_in_the_channel_folder(
    pytester: pytest.Pytester, image: str
) -> None:
    """Red on 636b730 with --super-disk=64m: (a) 20 nested 250-character folders, then 400 MB in
    an ordinary file: the engine reported the layer's size as -1 and the watch took it as small;
    (b) 400 MB at the bottom of such a path in the host folder of the kernel channels: the walk
    skipped the long path in silence, and the host folder reached 400 MiB. Both tasks passed."""
    pytester.makeini("[pytest]\nsuper_tasks = tasks\n")
    expert = pytester.path / "tasks" / "expert"
    expert.mkdir(parents=True)
    (expert / "deep_layer.yaml").write_text(
        _disk_task("deep_layer", "/content", "/content/big.bin")
    )
    (expert / "deep_channel.yaml").write_text(
        _disk_task("deep_channel", "/run/pytest-super", "big.bin")
    )
    result = pytester.runpytest_subprocess(
        "tasks", "--super-agent=gold", "--super-disk=64m", "--super-mem=1g", "-n", "2"
    )
    (run_dir,) = (pytester.path / "reports").iterdir()
    lines = [json.loads(ln) for ln in (run_dir / "results.jsonl").read_text().splitlines()]
    statuses = {r["task_id"]: r["exit_status"] for r in lines}
    out = result.stdout.str()[-3000:]
    # (a) the layer's size, unknown to the engine, is measured on the host: over the limit
    assert statuses["deep_layer"] == "disk_limit", out
    # (b) the channel folder is a tmpfs of its own (256 KiB, sockets only): the task's write fails
    # there at once, and nothing of it reaches the host's disk
    assert statuses["deep_channel"] != "submitted", out
    trajectory = json.loads((run_dir / "trajectories" / "deep_channel.json").read_text())
    assert "No space left on device" in trajectory["steps"][0]["output"]
