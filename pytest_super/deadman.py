"""The dead man's switch, in one place: watch an owner (a `process_identity.Holder`, and the read
end of a pipe only it writes), and act once when it is gone; and the owner's side, a heartbeat.

Every owner of what outlives a process uses it:

- the Ray node watchdog (executors/ray/watchdog.py) waits on its worker (`ended_well`), then
  removes the task's folders;
- the controller's guardian (executors/ray/guardian.py) waits on its controller
  (`ended_well`), then says what the run left;
- a Docker lease (kernels/docker/lease.py) renews itself on its engine (`Heartbeat`) while its
  process lives; the engine's reaper removes its containers once it is not renewed (or its
  holder is provably gone).

The API:

- `wait_for_end(pipe, holder)`: block until the owner closes the pipe (what it wrote is
  returned: a word such as "done" says it ended as it should) or the owner is provably gone;
- `ended_well(pipe, holder, said)`: block until the owner ended; True when it wrote `said`,
  False when it is gone (its pipe closed without the word, and its pid gone too);
- `watch(holder, on_death)`: the same in a daemon thread, calling `on_death()` once when the
  owner is gone (not when it closed the pipe after writing `said`); `Watch.stop()` ends the
  watch without a call;
- `Heartbeat(every_s, beat)`: call `beat()` every `every_s` in a daemon thread until `stop()`.

The switch's setting (`PYTEST_SUPER_DEAD_MAN_SWITCH`) and who a process is live in
process_identity.py. One owner does not use this module: the reaper shipped into its own
container (kernels/inside/reaper.py) is a separate program that imports nothing of the
package; it judges leases by the same labels (tests/test_dead_man_switch.py checks they agree).

Standard library only (and process_identity.py): the node watchdog imports it while it runs as
a bare script.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable
from typing import IO

from pytest_super.process_identity import Holder, start_ticks

#: seconds between checks that the owner lives, beside the pipe (a child the owner forked
#: without exec may hold the pipe's write end after the owner's death)
POLL_S = 5.0


def holder_of(pid: int, ticks: int | None) -> Holder:
    """The holder `pid` names on this machine, started at `ticks` (None: not known; then only
    its pipe tells whether it lives)."""
    here = Holder.of_this_process()
    return Holder(pid, here.boot_id, here.pid_ns, ticks)


def gone(holder: Holder) -> bool:
    """Is the owner provably gone (its start time unknown: only its pipe tells)?"""
    return holder.start_ticks is not None and start_ticks(holder.pid) != holder.start_ticks


def wait_for_end(
    pipe: IO[bytes] | None,
    holder: Holder,
    *,
    poll_s: float = POLL_S,
    stop: threading.Event | None = None,
) -> bytes:
    """What the owner wrote on `pipe`, once the pipe ended (EOF or an error), the owner is
    provably gone, or `stop` is set. Without a pipe, only the owner's death (or `stop`) ends
    the wait. What the owner wrote before it died is read too (its last word before exit)."""
    said = b""
    stop = stop or threading.Event()
    while not gone(holder) and not stop.is_set():
        if pipe is None:
            stop.wait(poll_s)
            continue
        ready, _, _ = select.select([pipe], [], [], poll_s)
        if ready:
            chunk = _read(pipe)
            if not chunk:
                return said
            said += chunk
    while pipe is not None and select.select([pipe], [], [], 0)[0]:  # its last word
        chunk = _read(pipe)
        if not chunk:
            break
        said += chunk
    return said


def ended_well(
    pipe: IO[bytes] | None,
    holder: Holder,
    said: bytes,
    *,
    poll_s: float = POLL_S,
    stop: threading.Event | None = None,
) -> bool:
    """Block until the owner `holder` ended: True when it wrote `said` on `pipe` (it ended as it
    should, or `stop` was set), False once it is gone: its pipe ended without `said` and its pid
    is gone too (a pipe closed by another hand, a child the owner forked holding the write end,
    do not count while the owner lives)."""
    stop = stop or threading.Event()
    words = wait_for_end(pipe, holder, poll_s=poll_s, stop=stop)
    if stop.is_set() or (said and said in words):
        return True
    while holder.start_ticks is not None and not gone(holder):
        if stop.wait(poll_s):
            return True
    return False


def _read(pipe: IO[bytes]) -> bytes:
    try:
        return os.read(pipe.fileno(), 4096)
    except OSError:
        return b""


class Watch:
    """A watch of one owner in a daemon thread (`watch`)."""

    def __init__(
        self,
        holder: Holder,
        on_death: Callable[[], None],
        pipe: IO[bytes] | None,
        said: bytes,
        poll_s: float,
    ) -> None:
        self.holder = holder
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(on_death, pipe, said, poll_s), daemon=True, name="deadman"
        )
        self._thread.start()

    def _run(
        self, on_death: Callable[[], None], pipe: IO[bytes] | None, said: bytes, poll_s: float
    ) -> None:
        if not ended_well(pipe, self.holder, said, poll_s=poll_s, stop=self._stop):
            on_death()

    def stop(self) -> None:
        """End the watch; `on_death` is not called after this returns."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for the watch to end (the owner gone and `on_death` returned, or stopped)."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()


def watch(
    holder: Holder,
    on_death: Callable[[], None],
    *,
    pipe: IO[bytes] | None = None,
    said: bytes = b"",
    poll_s: float = POLL_S,
) -> Watch:
    """Call `on_death()` once, in a daemon thread, when the owner `holder` is gone: provably
    (its pid gone or naming another process), or its `pipe` ended without the word `said`
    and then its pid is gone. `Watch.stop()` ends it without a call."""
    return Watch(holder, on_death, pipe, said, poll_s)


class Heartbeat:
    """The owner's side: `beat()` every `every_s` in a daemon thread until `stop()` (a beat that
    raises is the beat's to say: it is logged by the caller's own code, here it only ends that
    beat)."""

    def __init__(self, every_s: float, beat: Callable[[], None], *, name: str = "heartbeat"):
        self.every_s = every_s
        self._beat = beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with contextlib.suppress(Exception):  # a beat's failure never ends the heartbeat
                self._beat()

    def stop(self) -> None:
        """No beat starts after this (one under way finishes)."""
        self._stop.set()

    def beating(self) -> bool:
        """Whether its thread still runs (a beat under way after `stop()` included)."""
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (after `stop()`), at most `timeout` seconds (not from a
        beat: a thread cannot wait for itself)."""
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


__all__ = [
    "POLL_S",
    "Heartbeat",
    "Watch",
    "ended_well",
    "gone",
    "holder_of",
    "wait_for_end",
    "watch",
]
