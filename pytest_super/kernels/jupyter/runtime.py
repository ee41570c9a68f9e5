"""Running cells in a Jupyter kernel over the wire protocol: the *runtime* half of a backend.

A `Box` is where a kernel process lives (a local subprocess, a Docker container) and knows how to
start, restart and remove it. `JupyterKernel` talks to the kernel in a box with jupyter_client and
implements `pytest_super.kernels.base.Kernel`: it runs cells, collects their output (capped),
enforces timeouts by interrupting over the control channel, notices a dead kernel and restarts it.

Output of a cell is everything published on IOPub for its request until the kernel reports
`idle` for it. If the cell leaves more Python threads alive in the kernel than the kernel had at
start, collection goes on for a grace of `LATE_OUTPUT_GRACE_S` after the idle status (extended by
each late message, at most `LATE_OUTPUT_GRACE_MAX_S`), so that a thread printing just after the
cell ends is not lost; cells that leave no thread behind (the common case, e.g. `1+1`) pay no
grace at all. Stream text that arrives later still, or between cells, is kept and put at the start
of the next cell's output.

Memory: the harness's memory does not grow with what a cell prints. Each cell's output is capped
(`CappedText`); each message is capped inside the kernel before it is sent (`message_cap`, shipped
into the kernel at connect time); and the client's sockets refuse any frame above
`max_frame_bytes` and queue at most `RECEIVE_QUEUE_MESSAGES` messages, so code that undoes the
kernel-side cap loses its output (the frame is dropped unread), never the harness its memory.
"""

from __future__ import annotations

import base64
import builtins
import errno
import time
from queue import Empty

from pytest_super.kernels.base import CellResult, CellStatus
from pytest_super.kernels.inside import kernel_module
from pytest_super.kernels.jupyter.connection import (
    ALIVE_CHECK_INTERVAL_S,
    MAX_READ_BYTES,
    THREADS,
    THREADS_EXPR,
    KernelConnection,
    RunningCell,
    expression_value,
)
from pytest_super.kernels.jupyter.output import CappedText

#: After a cell's idle status, how long to keep listening for late output when the cell left
#: threads running. ipykernel publishes a write 0.2 s after it happens (its flush interval) unless
#: the writer flushes, so a thread printing 0.2 s after the cell ends shows up about 0.4 s after
#: the idle status; measured here up to 0.52 s on a busy machine. 1 s covers that with margin.
LATE_OUTPUT_GRACE_S = 1.0
#: Upper bound on the grace however many late messages keep arriving.
LATE_OUTPUT_GRACE_MAX_S = 3.0
#: How long an interrupted cell may take to stop before the kernel is restarted.
INTERRUPT_GRACE_S = 5.0


#: the in-kernel half of reading and writing files (`file_access`, shipped as source)
_FILES = kernel_module("pytest_super.kernels.inside", "file_access.py")


class JupyterKernel(KernelConnection):
    """A kernel in a `Box`, driven over the Jupyter protocol. Implements `Kernel`.

    `duration_s` of a result is the wall time that call covered: for a cell that finishes within
    its timeout, from sending to idle; for a cell collected over several calls (`execute` that
    timed out without interrupting, then `wait`, then `interrupt`) the durations add up to the
    time from sending to idle. Each call returns only the output that arrived during it.
    """

    # -- cells -------------------------------------------------------------------------------

    def execute(
        self, code: str, timeout: float, *, interrupt_on_timeout: bool = True
    ) -> CellResult:
        """Run one cell. On timeout, interrupt it (default) or leave it running (`wait` later).

        If a cell left running is still going, it is interrupted first and what it printed
        meanwhile comes at the start of this cell's output.
        """
        client = self._live_client()
        if self._cell is not None:
            rest = self.interrupt()
            self._carry.append_block(
                f"[output of the previous cell, which was still running and has now been stopped]\n"
                f"{rest.output}"
            )
        self._ran_code = True
        msg_id = client.execute(
            code,
            store_history=True,
            allow_stdin=False,
            user_expressions={THREADS: THREADS_EXPR},
        )
        self._cell = RunningCell(msg_id=msg_id, sent_at=time.perf_counter())
        return self._collect(timeout, interrupt_on_timeout, self._cell.sent_at)

    def wait(self, timeout: float) -> CellResult:
        """Keep collecting the cell left running by a timeout, for at most `timeout` seconds.

        Returns the output that arrived meanwhile: status ok/error when the cell finished,
        "timeout" with still_running=True otherwise. Without a running cell: empty, "ok".
        """
        self._live_client()
        if self._cell is None:
            return CellResult(output="", status="ok", duration_s=0.0)
        return self._collect(timeout, False, time.perf_counter())

    def check_limits(self) -> None:
        """Measure the box against its limits now (see `Box.check_limits`)."""
        self._box.check_limits()

    def interrupt(self) -> CellResult:
        """Interrupt the cell left running and return the rest of its output (status "timeout").

        Kernel state survives. If the cell finished before the interrupt, its own status is
        returned. If it does not stop within `INTERRUPT_GRACE_S`, the kernel is restarted.
        """
        self._live_client()
        cell = self._cell
        if cell is None:
            return CellResult(output="", status="ok", duration_s=0.0)
        started = time.perf_counter()
        out = self._take_carry()
        if self._drain_ready(cell, out):  # it finished on its own meanwhile
            return self._finish(cell, out, started)
        elapsed = started - cell.sent_at
        return self._stop_cell(cell, out, started, f"the cell had run for {elapsed:.1f} s")

    def _collect(self, timeout: float, interrupt_on_timeout: bool, started: float) -> CellResult:
        cell = self._cell
        assert cell is not None
        out = self._take_carry()
        outcome = self._drain(cell, out, started + timeout)
        if outcome == "idle":
            return self._finish(cell, out, started)
        if outcome == "died":
            return self._died(out, started)
        elapsed = time.perf_counter() - cell.sent_at
        if not interrupt_on_timeout:
            return CellResult(
                output=out.text(),
                status="timeout",
                duration_s=time.perf_counter() - started,
                truncated=out.truncated,
                still_running=True,
            )
        return self._stop_cell(
            cell, out, started, f"the cell ran out of time after {elapsed:.1f} s"
        )

    def _stop_cell(
        self, cell: RunningCell, out: CappedText, started: float, what: str
    ) -> CellResult:
        """Interrupt `cell`, collect until idle (bounded), restart the kernel if it won't stop."""
        client = self._live_client()
        client.control_channel.send(client.session.msg("interrupt_request", {}))
        outcome = self._drain(cell, out, time.perf_counter() + INTERRUPT_GRACE_S)
        if outcome == "died":
            return self._died(out, started)
        if outcome == "idle":
            self._read_reply(cell.msg_id)
            while client.control_channel.msg_ready():  # the interrupt_reply
                client.control_channel.get_msg(timeout=0)
            self._cell = None
            out.append_block(f"[{what} and was interrupted; variables and imports are kept]")
        else:
            self._cell = None
            self._restart_box()
            out.append_block(
                f"[{what}; it did not stop within {INTERRUPT_GRACE_S:g} s of the interrupt, so the "
                "kernel was restarted: variables and imports are lost, files are kept]"
            )
        return CellResult(
            output=out.text(),
            status="timeout",
            duration_s=time.perf_counter() - started,
            truncated=out.truncated,
        )

    def _finish(self, cell: RunningCell, out: CappedText, started: float) -> CellResult:
        """The cell's idle status was seen: read its reply, wait out late output if needed."""
        reply = self._read_reply(cell.msg_id)
        idle_at = time.perf_counter()
        self._cell = None
        content = reply.get("content", {}) if reply else {}
        status: CellStatus = "error" if cell.error_seen else "ok"
        if content.get("status") in ("error", "aborted"):
            status = "error"
        threads = expression_value(content.get("user_expressions", {}), THREADS)
        if threads is not None and threads.isdigit() and int(threads) > self._baseline_threads:
            self._late_output(cell, out)
        return CellResult(
            output=out.text(),
            status=status,
            duration_s=idle_at - started,
            truncated=out.truncated,
        )

    def _late_output(self, cell: RunningCell, out: CappedText) -> None:
        now = time.perf_counter()
        hard_end = now + LATE_OUTPUT_GRACE_MAX_S
        end = now + LATE_OUTPUT_GRACE_S
        while (now := time.perf_counter()) < min(end, hard_end):
            try:
                msg = self._next_iopub(min(end, hard_end) - now)
            except Empty:
                break
            self._take(msg, cell, out)
            end = time.perf_counter() + LATE_OUTPUT_GRACE_S

    def _drain(self, cell: RunningCell, out: CappedText, deadline: float) -> str:
        """Read IOPub into `out` until the cell's idle ("idle"), `deadline` ("timeout") or death."""
        next_check = time.perf_counter() + ALIVE_CHECK_INTERVAL_S
        while True:
            now = time.perf_counter()
            if now >= next_check:
                if not self._box.is_alive():
                    return "died"
                next_check = time.perf_counter() + ALIVE_CHECK_INTERVAL_S
            try:
                msg = self._next_iopub(max(min(deadline, next_check) - now, 0))
            except Empty:
                if time.perf_counter() >= deadline:
                    return "timeout"
                continue
            if self._take(msg, cell, out):
                return "idle"
            if time.perf_counter() >= deadline:
                return "timeout"

    def _drain_ready(self, cell: RunningCell, out: CappedText) -> bool:
        """Read the IOPub messages already queued; True if the cell's idle status was among them."""
        client = self._live_client()
        while client.iopub_channel.msg_ready():
            try:
                msg = self._next_iopub(0)
            except Empty:
                return False
            if self._take(msg, cell, out):
                return True
        return False

    def _died(self, out: CappedText, started: float) -> CellResult:
        reason = self._box.death_reason() or "reason unknown"
        self._cell = None
        self._restart_box()
        out.append_block(
            f"[the kernel died ({reason}) and was restarted: variables and imports are lost, "
            "files are kept]"
        )
        return CellResult(
            output=out.text(),
            status="died",
            duration_s=time.perf_counter() - started,
            truncated=out.truncated,
        )

    # -- files -------------------------------------------------------------------------------

    def read_file(self, path: str) -> str:
        """Read a text file (UTF-8) in the kernel; relative to the kernel's current directory.

        A file larger than `MAX_READ_BYTES` raises OSError(EFBIG); no more than that is sent.
        """
        expr = f"{_FILES}.read_base64({_b64(path)!r}, {MAX_READ_BYTES + 1})"
        data = base64.b64decode(self._evaluate(expr, path))
        if len(data) > MAX_READ_BYTES:
            raise OSError(
                errno.EFBIG,
                f"larger than {MAX_READ_BYTES} bytes, the most a file is read whole in "
                f"{self.description}; look at parts of it with shell commands (head, sed -n)",
                path,
            )
        return data.decode("utf-8", "replace")

    def write_file(self, path: str, text: str) -> None:
        """Write a text file (UTF-8) in the kernel, creating parent directories."""
        self.write_bytes(path, text.encode("utf-8"))

    def read_bytes(self, path: str) -> bytes:
        """Read a file's bytes in the kernel (the edit tool keeps bytes it does not touch)."""
        expr = f"{_FILES}.read_base64({_b64(path)!r})"
        return base64.b64decode(self._evaluate(expr, path))

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a file's bytes in the kernel, creating parent directories."""
        payload = base64.b64encode(data).decode("ascii")
        expr = f"{_FILES}.write_base64({_b64(path)!r}, {payload!r})"
        self._evaluate(expr, path)

    def _evaluate(self, expression: str, path: str) -> str:
        """Evaluate one expression in the kernel, silently, and return its repr without quotes."""
        if self._cell is not None:
            raise RuntimeError(
                f"cannot access {path!r} in {self.description}: a cell is still running; "
                "call wait() or interrupt() first"
            )
        result = self._silent_request("", {"v": expression}, f"accessing {path!r}")["v"]
        if result.get("status") != "ok":
            ename, evalue = result.get("ename", "Error"), result.get("evalue", "")
            if ename == "FileNotFoundError":
                raise FileNotFoundError(errno.ENOENT, f"no such file in {self.description}", path)
            message = f"{path}: {ename}: {evalue} (in {self.description})"
            exc_type = getattr(builtins, ename, None)
            if isinstance(exc_type, type) and issubclass(exc_type, OSError):
                raise exc_type(message)
            raise OSError(message)
        text: str = result["data"]["text/plain"]
        return text.strip("'\"")

    # -- lifecycle ---------------------------------------------------------------------------

    def restart(self) -> None:
        """Restart the kernel process: state is lost, the box and its files stay."""
        self._live_client()
        self._cell = None
        self._restart_box()

    def is_alive(self) -> bool:
        return not self._closed and self._box.is_alive()

    def detach(self) -> str:
        """Stop talking to the kernel, leave its box running; return how to get in."""
        if self._closed:
            raise RuntimeError(f"{self.description} is already closed")
        self._closed = True
        self._stop_client()
        return self._box.detach()

    def close(self) -> None:
        """Stop the client and remove the box. Safe to call twice (and after `detach`: no-op)."""
        if self._closed:
            return
        self._closed = True
        self._stop_client()
        self._box.remove()

    def __enter__(self) -> JupyterKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")
