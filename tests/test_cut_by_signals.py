"""What a signal's exception cuts in the middle: a scratch folder's removal (scratch.py), a Jupyter
kernel client's making (kernels/jupyter/connection.py). CI of 4c95659 saw both, once each in a
full run: `replay-run` stopped by SIGINT left its `pytest-super-replay-*` folder, and a run
interrupted while it connected to its kernel printed jupyter_client's `__del__` traceback.

Each moment is hit for sure: a profile hook of the child process sends the real signal to the
process at that moment, and Python's own handler (or `quiet_interrupts`') raises where it lands.
The stdlib's and jupyter_client's own classes, run the same way, show the hook lands in the
window (they fail as before)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# the child: a folder of 300 files, the signal sent at the 50th unlink of its removal
_CUT_REMOVAL = """
import os, signal, sys, tempfile
from pathlib import Path
from pytest_super.interrupts import Stopped, quiet_interrupts
from pytest_super.scratch import scratch_folder

maker, quiet, under = sys.argv[1], sys.argv[2] == "quiet", Path(sys.argv[3])
unlinks = 0

def cut(frame, event, arg):
    global unlinks
    if event == "c_call" and getattr(arg, "__name__", "") == "unlink":
        unlinks += 1
        if unlinks == 50:
            sys.setprofile(None)
            os.kill(os.getpid(), signal.SIGINT)

def folder():
    if maker == "stdlib":
        return tempfile.TemporaryDirectory(prefix="cut-", dir=under)
    return scratch_folder("cut-", under=under)

def run():
    with folder() as made:
        for i in range(300):
            Path(made, f"f{i}").write_text("x")
        sys.setprofile(cut)

try:
    if quiet:
        with quiet_interrupts():
            run()
    else:
        run()
except KeyboardInterrupt as stop:
    print(f"cut: {type(stop).__name__} after {unlinks} unlinks", flush=True)
    sys.exit(130)
print("not cut", flush=True)
"""


def _cut_removal(
    tmp_path: Path, maker: str, quiet: bool
) -> tuple[subprocess.CompletedProcess[str], list[Path]]:
    under = tmp_path / "scratch"
    under.mkdir()
    ended = subprocess.run(
        [sys.executable, "-c", _CUT_REMOVAL, maker, "quiet" if quiet else "plain", str(under)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return ended, sorted(under.iterdir())


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet_interrupts", "default-handler"])
def test_a_scratch_folder_whose_removal_a_signal_cut_is_removed_all_the_same(
    tmp_path: Path, quiet: bool
) -> None:
    """By `quiet_interrupts` as the stopped command unwinds, or when the process ends."""
    ended, left = _cut_removal(tmp_path, "ours", quiet)
    assert ended.returncode == 130 and "cut: " in ended.stdout, (ended.stdout, ended.stderr)
    assert "Traceback" not in ended.stderr, ended.stderr
    assert left == []


def test_the_stdlib_temporary_directory_so_cut_is_left_half_removed(tmp_path: Path) -> None:
    """The control: the signal lands in the removal (TemporaryDirectory forgets its folder before
    it removes it, and nothing removes the rest)."""
    ended, left = _cut_removal(tmp_path, "stdlib", True)
    assert ended.returncode == 130 and "cut: Stopped" in ended.stdout, (ended.stdout, ended.stderr)
    assert len(left) == 1 and 0 < len(list(left[0].iterdir())) < 300, left


# the child: SIGINT as traitlets starts to set the client up (`HasTraits.setup_instance`)
_CUT_MAKING = """
import gc, json, signal, sys
from jupyter_client.blocking.client import BlockingKernelClient
from pytest_super.kernels.jupyter.connection import KernelClient

kind = {"ours": KernelClient, "jupyter_client": BlockingKernelClient}[sys.argv[1]]
seen = []
sys.unraisablehook = lambda u: seen.append(f"{type(u.exc_value).__name__}: {u.exc_value}")

def cut(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "setup_instance":
        sys.setprofile(None)
        signal.raise_signal(signal.SIGINT)

sys.setprofile(cut)
try:
    kind()
    cut_here = False
except KeyboardInterrupt:
    cut_here = True
sys.setprofile(None)
gc.collect()
print(json.dumps({"cut": cut_here, "unraisable": seen}))
"""


@pytest.mark.parametrize(("kind", "unraisable"), [("ours", 0), ("jupyter_client", 1)])
def test_a_kernel_client_whose_making_ctrl_c_cut_is_collected_quietly(
    kind: str, unraisable: int
) -> None:
    """Ours is collected with nothing raised; jupyter_client's own (the control) raises its
    AttributeError into the unraisable hook, as pytest printed it."""
    ended = subprocess.run(
        [sys.executable, "-c", _CUT_MAKING, kind], capture_output=True, text=True, timeout=120
    )
    assert ended.returncode == 0, ended.stderr
    seen = json.loads(ended.stdout)
    assert seen["cut"] is True, seen
    assert len(seen["unraisable"]) == unraisable, seen
