"""The one dead man's switch loop (pytest_super/deadman.py), on real processes: an owner that
ends as it should (its word on the pipe), one SIGKILLed, one whose pipe another hand closed,
a watch stopped first, and the owner's heartbeat. Fast: poll periods of 0.05 s."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from pytest_super import deadman
from pytest_super.process_identity import Holder, start_ticks

#: an owner: its stdout is the pipe we read; told "end" on its stdin, it writes its word and
#: closes the pipe, then lives on
OWNER = r"""
import os, sys, time
line = sys.stdin.readline()
if line.strip() == "end":
    sys.stdout.write("done\n"); sys.stdout.flush(); os.close(1)
time.sleep(600)
"""


def _owner() -> tuple[subprocess.Popen[bytes], Holder]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    ticks = None
    while ticks is None:  # its start time, once /proc shows it
        ticks = start_ticks(proc.pid)
    return proc, deadman.holder_of(proc.pid, ticks)


def test_a_killed_owner_is_acted_on_once() -> None:
    proc, holder = _owner()
    deaths: list[int] = []
    watch = deadman.watch(
        holder, lambda: deaths.append(1), pipe=proc.stdout, said=b"done", poll_s=0.05
    )
    assert not watch.join(0.3) and deaths == []  # alive: nothing done
    proc.kill()
    proc.wait()
    assert watch.join(10) and deaths == [1]
    assert deadman.gone(holder)


def test_an_owner_that_ends_as_it_should_is_not_acted_on() -> None:
    proc, holder = _owner()
    deaths: list[int] = []
    watch = deadman.watch(
        holder, lambda: deaths.append(1), pipe=proc.stdout, said=b"done", poll_s=0.05
    )
    assert proc.stdin is not None
    proc.stdin.write(b"end\n")
    proc.stdin.flush()
    assert watch.join(10) and deaths == []  # its word read, the pipe closed: done
    assert not deadman.gone(holder)  # it lives on, and is not the watch's business any more
    proc.kill()
    proc.wait()


def test_a_pipe_closed_by_another_hand_waits_for_the_owners_death() -> None:
    """The pipe ends without the word while the owner lives (a child it forked held the write
    end, and closed it): nothing is done until the owner's pid is gone."""
    read, write = os.pipe()
    proc, holder = _owner()
    deaths: list[float] = []
    with os.fdopen(read, "rb") as pipe:
        watch = deadman.watch(
            holder, lambda: deaths.append(time.monotonic()), pipe=pipe, poll_s=0.05
        )
        os.close(write)  # the pipe ends: not the owner's death
        assert not watch.join(0.5) and deaths == []
        killed = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert watch.join(10) and len(deaths) == 1 and deaths[0] >= killed


def test_a_stopped_watch_never_calls_back() -> None:
    proc, holder = _owner()
    deaths: list[int] = []
    watch = deadman.watch(holder, lambda: deaths.append(1), poll_s=0.05)  # no pipe: its pid only
    watch.stop()
    proc.kill()
    proc.wait()
    time.sleep(0.3)
    assert deaths == []


def test_wait_for_end_reads_the_owners_last_word_after_it_died() -> None:
    """An owner that wrote its word and exited at once: the word is read, though the owner was
    found gone before the pipe was read."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.write('ended\\n')"], stdout=subprocess.PIPE
    )
    holder = deadman.holder_of(proc.pid, 1)  # a start time it never had: gone from the start
    proc.wait()
    assert proc.stdout is not None
    assert deadman.ended_well(proc.stdout, holder, b"ended", poll_s=0.05)


def test_a_heartbeat_beats_until_stopped() -> None:
    beats: list[float] = []
    heart = deadman.Heartbeat(0.02, lambda: beats.append(time.monotonic()))
    deadline = time.monotonic() + 10
    while len(beats) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    heart.stop()
    assert len(beats) >= 3 and heart.stopped
    time.sleep(0.1)  # a beat under way when stopped may finish; none starts after
    after = len(beats)
    time.sleep(0.2)
    assert len(beats) == after


def test_a_beat_that_fails_does_not_end_the_heartbeat() -> None:
    beats: list[int] = []

    def beat() -> None:
        beats.append(1)
        raise OSError("the engine did not answer")

    heart = deadman.Heartbeat(0.02, beat)
    deadline = time.monotonic() + 10
    while len(beats) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    heart.stop()
    assert len(beats) >= 2
