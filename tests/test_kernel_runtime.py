"""JupyterKernel on real ipykernel subprocesses (the local backend), plus the output helpers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings

import pytest

from pytest_super.errors import KernelStartError
from pytest_super.kernels import local
from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.kernels.inside.message_cap import CUT_KEY, cut, shrink
from pytest_super.kernels.jupyter.output import CappedText, clean_for_model
from pytest_super.kernels.jupyter.runtime import (
    INTERRUPT_GRACE_S,
    LATE_OUTPUT_GRACE_S,
    JupyterKernel,
)
from pytest_super.kernels.local import LocalBox, git_mirror_env, kernel_environment

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def kernel():
    k = JupyterKernel(LocalBox(task_id="test"))
    yield k
    k.close()


# -- output helpers ------------------------------------------------------------------------


def test_clean_for_model_strips_ansi_and_collapses_progress_bars():
    raw = (
        "\x1b[31mred\x1b[0m text\n"
        "\r  0%|          | 0/10 [00:00<?, ?it/s]\r 50%|#####     | 5/10\r100%|##########| 10/10\n"
        "Epoch 1\n"
        " 10%|#         | 1/10\n 20%|##        | 2/10\n 30%|###       | 3/10\n"
        "loss 0.5\r\n"
    )
    assert clean_for_model(raw) == (
        "red text\n100%|##########| 10/10\nEpoch 1\n 30%|###       | 3/10\nloss 0.5\n"
    )


def test_capped_text_keeps_head_and_tail_with_marker():
    out = CappedText(100)
    out.append("a" * 30)
    out.append("b" * 1000)
    out.append("c" * 30)
    text = out.text()
    assert out.truncated
    assert text.startswith("a" * 30 + "b" * 20 + "\n... [")
    assert text.endswith("b" * 20 + "c" * 30)
    assert f"[{30 + 1000 + 30 - 100} bytes cut]" in text
    small = CappedText(100)
    small.append("x = 1\n")
    small.append_block("2")
    assert small.text() == "x = 1\n2\n" and not small.truncated


# -- cells -----------------------------------------------------------------------------------


def test_ipython_semantics_and_state(kernel):
    assert isinstance(kernel, Kernel)
    r = kernel.execute("!echo hi", 30)
    assert r.status == "ok" and "hi" in r.output
    assert kernel.execute("x = 41", 30).status == "ok"
    r = kernel.execute("%%writefile notes.txt\nline one\n", 30)
    assert r.status == "ok" and "notes.txt" in r.output
    r = kernel.execute("import os\nos.makedirs('sub', exist_ok=True)\n%cd sub", 30)
    assert r.status == "ok", r.output
    r = kernel.execute("print(x + 1)\nprint(open('../notes.txt').read())\nos.getcwd()", 30)
    assert r.status == "ok"
    assert "42\nline one\n" in r.output and "/sub'" in r.output


def test_results_display_data_and_errors(kernel):
    r = kernel.execute("1+1", 30)
    assert (r.output, r.status, r.truncated, r.still_running) == ("2\n", "ok", False, False)
    r = kernel.execute(
        "from IPython.display import display\nprint('a', end='')\ndisplay('shown')\n7", 30
    )
    assert r.output == "a\n'shown'\n7\n"
    r = kernel.execute("def f():\n    raise ValueError('bad value')\nf()", 30)
    assert r.status == "error"
    assert r.output.startswith("ValueError: bad value\n")
    assert "Traceback" in r.output and "raise ValueError('bad value')" in clean_for_model(r.output)
    assert "\x1b[" in r.output  # raw text: ANSI codes kept for landmarks
    assert kernel.execute("1", 30).status == "ok"  # an error does not stick


def test_busy_loop_timeout_interrupts_and_keeps_state(kernel):
    kernel.execute("kept = 'yes'", 30)
    r = kernel.execute("while True: pass", 2)
    assert r.status == "timeout" and not r.still_running
    # stopped at its deadline, not run on (the cell never ends); how soon after the deadline
    # depends on the machine's load: no bound near 2 s here (issue 42)
    assert 2.0 <= r.duration_s < 30.0, r.duration_s
    assert "KeyboardInterrupt" in r.output
    assert "ran out of time after 2.0 s and was interrupted" in r.output
    assert kernel.execute("kept", 30).output == "'yes'\n"


def test_cell_deaf_to_interrupts_gets_the_kernel_restarted(kernel):
    kernel.write_file("kept.txt", "k")
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    started = time.perf_counter()
    r = kernel.execute(code, 1)
    # the cell never ends: that the call returns at all is the behaviour (no bound near the
    # 1 + INTERRUPT_GRACE_S s it takes: a restart's time is the machine's load, issue 42)
    assert time.perf_counter() - started < 1 + INTERRUPT_GRACE_S + 120
    assert (r.status, r.still_running) == ("timeout", False)
    assert "kernel was restarted" in r.output
    assert kernel.execute("1+1", 30).output == "2\n"
    assert kernel.read_file("kept.txt") == "k"


def test_shell_command_timeout_interrupts(kernel):
    started = time.perf_counter()
    r = kernel.execute("!sleep 100", 1)
    assert r.status == "timeout" and not r.still_running
    assert time.perf_counter() - started < 50.0  # long before the sleep's own 100 s
    assert kernel.execute("!echo after", 30).output.strip() == "after"


def test_left_running_then_wait_then_interrupt(kernel):
    code = "import time\nprint('start', flush=True)\ntime.sleep(1.5)\nprint('done')\nvalue = 3"
    r = kernel.execute(code, 0.5, interrupt_on_timeout=False)
    assert (r.status, r.still_running) == ("timeout", True)
    assert r.output == "start\n"
    r = kernel.wait(10)
    assert (r.status, r.still_running, r.output) == ("ok", False, "done\n")
    assert r.duration_s < 10  # the cell's end, not the wait's own 10 s

    r = kernel.execute(
        "for i in range(1000):\n    print(i, flush=True)\n    time.sleep(0.1)",
        0.35,
        interrupt_on_timeout=False,
    )
    assert (r.status, r.still_running) == ("timeout", True)
    r = kernel.wait(0.35)
    assert (r.status, r.still_running) == ("timeout", True)
    assert r.output and r.output.split()[0] != "0"  # only what came during the wait
    r = kernel.interrupt()
    assert (r.status, r.still_running) == ("timeout", False)
    assert "KeyboardInterrupt" in r.output and "was interrupted" in r.output
    assert kernel.execute("value", 30).output == "3\n"
    assert kernel.interrupt().status == "ok"  # nothing running: nothing to do


def test_execute_while_a_cell_runs_stops_it_first(kernel):
    r = kernel.execute("import time\ntime.sleep(30)", 0.3, interrupt_on_timeout=False)
    assert r.still_running
    r = kernel.execute("'next'", 30)
    assert r.status == "ok"
    assert "still running" in r.output and "KeyboardInterrupt" in r.output
    assert r.output.endswith("'next'\n")


def test_kernel_death_is_detected_and_restarted(kernel):
    kernel.write_file("survives.txt", "file\n")
    kernel.execute("lost = 1", 30)
    started = time.perf_counter()
    # (the pause lets zmq send 'before': os._exit does not wait for the kernel's sockets)
    r = kernel.execute(
        "import os, time\nprint('before', flush=True)\ntime.sleep(0.2)\nos._exit(1)", 60
    )
    assert time.perf_counter() - started < 30  # long before the cell's own 60 s timeout
    assert r.status == "died"
    assert r.output.startswith("before\n")
    assert "kernel died (exit code 1" in r.output.splitlines()[-1]
    assert "and was restarted" in r.output.splitlines()[-1]
    r = kernel.execute("'lost' in dir()", 30)
    assert (r.status, r.output) == ("ok", "False\n")
    assert kernel.read_file("survives.txt") == "file\n"


def test_kernel_killed_by_a_signal_is_reported(kernel):
    r = kernel.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", 60)
    assert r.status == "died"
    assert "killed by SIGKILL, perhaps by the out-of-memory killer" in r.output
    assert kernel.execute("1+1", 30).output == "2\n"


def _peak_rss_mb() -> float:
    return _status_mb("VmHWM:")


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/self/status")


def test_message_cap_keeps_head_and_tail_within_the_encoded_budget():
    text = "a" * 100 + "é" * 5000 + "\x00" * 3000 + "z" * 100  # NUL: 6 bytes in JSON
    short = cut(text, 4000)
    assert len(json.dumps(short, ensure_ascii=False).encode()) <= 4000
    assert short.startswith("a" * 100) and short.endswith("\x00" * 10 + "z" * 100)
    dropped = int(short.split("... [")[1].split(" bytes cut]")[0])
    kept = short.replace(f"\n... [{dropped} bytes cut] ...\n", "")
    assert dropped + len(kept.encode()) == len(text.encode())  # the marker counts UTF-8 bytes
    assert cut("small", 4000) == "small"


def test_message_cap_shrinks_only_what_is_too_big_and_says_so():
    stream = shrink("stream", {"name": "stdout", "text": "x" * 10_000}, 1000)
    assert stream["name"] == "stdout" and len(stream["text"]) < 600 and stream[CUT_KEY]
    data = {"text/plain": "y" * 9000, "image/png": "AAA"}
    shown = shrink("display_data", {"data": data, "metadata": {}}, 1000)
    assert list(shown["data"]) == ["text/plain"]
    note = "[image/png left out: the display was larger than 1000 bytes]"
    assert shown["data"]["text/plain"].endswith(note)
    error = {"ename": "E", "evalue": "v" * 5000, "traceback": ["t" * 100] * 100}
    shrunk = shrink("error", error, 2000)
    assert shrunk["ename"] == "E" and len(shrunk["traceback"]) == 1
    assert len(json.dumps(shrunk)) < 2000
    assert shrink("status", {"execution_state": "idle"}, 1000) == {"execution_state": "idle"}


def test_flood_is_capped_without_blowing_memory(kernel):
    # reset the peak to what this process holds now, so that earlier tests in this process (an
    # xdist worker holds 300 MB late in the suite) do not count: what the cell adds is measured
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_mb("VmRSS:")
    code = (
        "import sys\n"
        "for i in range(50):\n"
        "    sys.stdout.write(str(i % 10) * 1_000_000 + '\\n')\n"
        "print('THE END')"
    )
    r = kernel.execute(code, 120)
    peak = _peak_rss_mb() - before
    print(f"\n50 MB cell: {r.duration_s:.2f} s, the pytest process's peak grew {peak:.0f} MB")
    assert r.status == "ok" and r.truncated
    assert len(r.output.encode()) < 10_000_000 + 200
    assert r.output.startswith("0" * 1000)
    assert r.output.endswith("9" * 1000 + "\nTHE END\n")
    assert "bytes cut] ..." in r.output
    assert peak < 250, peak  # a fresh process of about 50 MB was held under 300 MB
    assert kernel.execute("1+1", 30).output == "2\n"  # nothing left over in the socket


def test_thread_printing_after_the_cell_is_captured(kernel):
    # no newline, no flush: ipykernel publishes it only after its 0.2 s flush interval
    code = (
        "import sys, threading, time\n"
        "def late():\n"
        "    time.sleep(0.2)\n"
        "    sys.stdout.write('late line')\n"
        "    time.sleep(0.5)\n"  # alive when the cell's end is seen, however loaded the machine
        "threading.Thread(target=late).start()\n"
        "print('cell end')"
    )
    started = time.perf_counter()
    r = kernel.execute(code, 30)
    took = time.perf_counter() - started
    assert r.output == "cell end\nlate line"
    # the grace was paid after the idle status and is not counted as cell time (send to idle);
    # lower bounds only: the machine's load cannot make a wait shorter (issue 42)
    assert took - r.duration_s >= LATE_OUTPUT_GRACE_S, (took, r.duration_s)
    assert took < 30  # the grace ended: not the cell's own 30 s
    # the grace is paid only while extra threads live: this cell leaves none behind (what follows
    # its idle status is a few lines of Python: microseconds against the 1 s grace)
    time.sleep(0.3)
    started = time.perf_counter()
    r = kernel.execute("1+1", 30)
    took = time.perf_counter() - started
    assert took - r.duration_s < LATE_OUTPUT_GRACE_S, (took, r.duration_s)


def test_read_and_write_files_relative_to_cd(kernel):
    kernel.execute("import os; os.makedirs('deep/er', exist_ok=True)\n%cd deep", 30)
    kernel.write_file("er/new.txt", "é ünïcode\n'quotes' \"and\" \\ back\n")
    assert kernel.read_file("er/new.txt") == "é ünïcode\n'quotes' \"and\" \\ back\n"
    kernel.write_file("made/by/write.txt", "x")  # parent directories are created
    r = kernel.execute("print(open('made/by/write.txt').read())", 30)
    assert r.output == "x\n"
    with pytest.raises(FileNotFoundError) as info:
        kernel.read_file("missing.txt")
    assert info.value.filename == "missing.txt"
    with pytest.raises(IsADirectoryError):
        kernel.read_file("er")
    # silent: no history entries, no execution count taken, `_` untouched
    r = kernel.execute("len(In), _", 30)
    assert r.output == "(4, '')\n"  # In: '', the two cells above, this one; print left `_` = ''


def test_secret_env_vars_do_not_reach_the_kernel(monkeypatch):
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "MY_SECRET", "DB_PASSWORD", "api_key_lower"):
        monkeypatch.setenv(name, "leak")
    monkeypatch.setenv("PLAIN_SETTING", "fine")
    with JupyterKernel(LocalBox()) as k:
        r = k.execute("import os\nsorted(k for k, v in os.environ.items() if v == 'leak')", 30)
        assert r.output == "[]\n"
        assert k.execute("os.environ['PLAIN_SETTING']", 30).output == "'fine'\n"
    env = kernel_environment({"A_KEY": "1", "B": "2"}, {"https://x.org/o": "/m"})
    assert "A_KEY" not in env and env["B"] == "2"


def test_git_mirror_makes_github_clones_local(tmp_path):
    repo = tmp_path / "mirrors" / "foo"
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README").write_text("from the mirror\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    mirrors = {"https://github.com/super-demo/": str(tmp_path / "mirrors")}
    env = git_mirror_env(mirrors)
    assert env["GIT_CONFIG_VALUE_2"] == "https://github.com/super-demo/"
    with JupyterKernel(LocalBox(git_mirrors=mirrors)) as k:
        r = k.execute("!git clone https://github.com/super-demo/foo", 60)
        assert r.status == "ok", r.output
        assert k.read_file("foo/README") == "from the mirror\n"


def test_close_twice_and_the_process_is_gone():
    box = LocalBox()
    k = JupyterKernel(box)
    pid, work_dir = box.pid, box.work_dir
    k.execute("!sleep 100 &", 30)
    k.close()
    k.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not os.path.exists(work_dir) and not os.path.exists(box.connection_file)
    with pytest.raises(RuntimeError, match="closed"):
        k.execute("1", 5)


def test_restart_loses_state_keeps_files(kernel):
    kernel.execute("v = 1\nopen('kept.txt', 'w').write('k')", 30)
    kernel.restart()
    assert kernel.execute("'v' in dir()", 30).output == "False\n"
    assert kernel.read_file("kept.txt") == "k"


def test_detach_leaves_the_kernel_running():
    box = LocalBox()
    k = JupyterKernel(box)
    try:
        k.execute("answer = 42", 30)
        how = k.detach()
        assert f"jupyter console --existing {box.connection_file}" in how
        assert oct(os.stat(box.connection_file).st_mode & 0o777) == "0o600"
        assert oct(os.stat(os.path.dirname(box.connection_file)).st_mode & 0o777) == "0o700"
        k.close()  # after detach: leaves the box alone
        assert box.is_alive()
        again = JupyterKernel(box)  # a person (or a new client) can get back in
        assert again.execute("answer", 30).output == "42\n"
        again.close()
    finally:
        box.remove()
    assert not box.is_alive()


# Started as the kernel's Python: binds and holds every port the connection file names, then runs
# ipykernel with them held (inherited across exec), as any process of the machine may take a port
# left free between its choice and the kernel's bind
PORT_TAKER = """import json, os, socket, sys
info = json.load(open(sys.argv[sys.argv.index("-f") + 1]))
taken = [socket.socket() for _ in range(5)]
for name, held in zip(("shell", "iopub", "stdin", "control", "hb"), taken):
    if info[name + "_port"]:
        held.bind(("127.0.0.1", info[name + "_port"]))
        held.listen()
        held.set_inheritable(True)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def test_ports_taken_before_the_kernel_starts_cannot_stop_it(tmp_path):
    """A fresh clone's `make test` lost a task to "zmq.error.ZMQError: Address already in use":
    the box chose the kernel's ports (bound, then closed) and an outgoing connection took one
    before the kernel bound it. The kernel now binds ports of its own choosing."""
    taker = tmp_path / "python"
    taker.write_text(f"#!{sys.executable}\n{PORT_TAKER}")
    taker.chmod(0o755)
    box = LocalBox(task_id="ports", python=str(taker))
    with JupyterKernel(box, startup_timeout_s=60) as k:
        assert k.execute("6 * 7", 30).output == "42\n"
        info = box.connection_info()
        assert all(info[f"{name}_port"] for name in local.PORT_NAMES)


def test_kernel_that_never_starts_is_reported_and_removed(tmp_path):
    box = LocalBox(python="/bin/false")
    with pytest.raises(KernelStartError, match="exited before it answered.*exit code 1"):
        JupyterKernel(box, startup_timeout_s=10)
    assert not os.path.exists(box.work_dir)


def test_start_local_kernel_warns_once(monkeypatch):
    monkeypatch.setattr(local, "_warned", False)
    kernels = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for _ in range(2):
                kernels.append(local.start_local_kernel(KernelSettings(), task_id="w"))
                cwd = kernels[-1].execute("import os; os.getcwd()", 30).output
                assert "/pytest-super-w-" in cwd
        finally:
            for k in kernels:
                k.close()
    messages = [str(w.message) for w in caught if "isolates nothing" in str(w.message)]
    assert len(messages) == 1
