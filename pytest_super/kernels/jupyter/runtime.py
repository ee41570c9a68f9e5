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
import contextlib
import errno
import functools
import time
from dataclasses import dataclass
from importlib import resources
from queue import Empty
from typing import TYPE_CHECKING, Any, Protocol, cast

import zmq
from jupyter_client.blocking.client import BlockingKernelClient

if TYPE_CHECKING:
    from jupyter_client.connect import KernelConnectionInfo

from pytest_super.errors import InfrastructureError, KernelBroken, KernelStartError
from pytest_super.kernels.base import CellResult, CellStatus
from pytest_super.kernels.inside import kernel_module
from pytest_super.kernels.inside.message_cap import CUT_KEY
from pytest_super.kernels.jupyter.output import CappedText

#: After a cell's idle status, how long to keep listening for late output when the cell left
#: threads running. ipykernel publishes a write 0.2 s after it happens (its flush interval) unless
#: the writer flushes, so a thread printing 0.2 s after the cell ends shows up about 0.4 s after
#: the idle status; measured here up to 0.52 s on a busy machine. 1 s covers that with margin.
LATE_OUTPUT_GRACE_S = 1.0
#: Upper bound on the grace however many late messages keep arriving.
LATE_OUTPUT_GRACE_MAX_S = 3.0
#: How often `Box.is_alive` is asked while waiting for a cell.
ALIVE_CHECK_INTERVAL_S = 1.0
#: How long an interrupted cell may take to stop before the kernel is restarted.
INTERRUPT_GRACE_S = 5.0
#: Bound on internal requests (file reads and writes, the working directory change).
SILENT_REQUEST_TIMEOUT_S = 60.0
#: Largest file `read_file` reads. Its callers (the edit tool, the SWE-agent viewer) read source
#: and config files; the largest file of the demo repositories is 5 kB. A larger file is refused
#: with EFBIG (the agent can still look at it with shell commands).
MAX_READ_BYTES = 4_000_000
#: Room in a frame beyond its capped text: header, parent header, metadata, JSON syntax.
FRAME_HEADROOM_BYTES = 1_000_000
#: Messages the client's ZeroMQ sockets queue before they stop reading (ZeroMQ's default is 1000):
#: with frames of at most `max_frame_bytes`, the queue holds at most this many times that.
RECEIVE_QUEUE_MESSAGES = 8

_THREADS = "pytest_super_threads"
_THREADS_EXPR = "__import__('threading').active_count()"


class Box(Protocol):
    """Where one kernel process lives; starts, restarts and removes it (the *deployment* half)."""

    description: str

    def connection_info(self) -> dict[str, Any]:
        """jupyter_client connection dict reachable from this host (ip, transport, ports, key)."""
        ...

    def is_alive(self) -> bool:
        """Is the kernel process alive? Cheap: polled about once a second while waiting."""
        ...

    def restart(self) -> dict[str, Any]:
        """Start a new kernel process in the same box (files stay); return its connection info."""
        ...

    def detach(self) -> str:
        """Leave the box running; return how a person gets in (commands)."""
        ...

    def remove(self) -> None:
        """Stop and delete the box. Idempotent; never raises for an already-gone box."""
        ...

    def death_reason(self) -> str:
        """Why the kernel process died, e.g. "exit code 1", "killed (out of memory)"; "" if unknown."""
        ...

    def check_limits(self) -> None:
        """Measure the box against its limits now (at an episode's end: a limit watched in the
        background may not have been measured since the last cell); raise the `EpisodeEnd` of a
        limit it went over."""
        ...


@dataclass
class _RunningCell:
    """A cell sent to the kernel whose idle status has not been seen yet."""

    msg_id: str
    sent_at: float
    error_seen: bool = False


#: the in-kernel half of reading and writing files (`file_access`, shipped as source)
_FILES = kernel_module("pytest_super.kernels.inside", "file_access.py")
#: shell commands of a cell read end-of-file from stdin (`closed_stdin`, shipped as source)
_CLOSED_STDIN = kernel_module("pytest_super.kernels.inside", "closed_stdin.py")


class JupyterKernel:
    """A kernel in a `Box`, driven over the Jupyter protocol. Implements `Kernel`.

    `duration_s` of a result is the wall time that call covered: for a cell that finishes within
    its timeout, from sending to idle; for a cell collected over several calls (`execute` that
    timed out without interrupting, then `wait`, then `interrupt`) the durations add up to the
    time from sending to idle. Each call returns only the output that arrived during it.
    """

    def __init__(
        self,
        box: Box,
        *,
        output_cap_bytes: int = 10_000_000,
        startup_timeout_s: float = 60.0,
        working_dir: str | None = None,
    ) -> None:
        self._box = box
        self._cap = output_cap_bytes
        self._startup_timeout_s = startup_timeout_s
        self._working_dir = working_dir
        self._client: BlockingKernelClient | None = None
        self._cell: _RunningCell | None = None
        self._carry = CappedText(output_cap_bytes)  # stream text no cell has claimed yet
        self._ran_code = False  # whether a cell of the task ran here (restart failures then end it)
        self._baseline_threads = 0
        self._session = ""  # our jupyter session id: late output of our own requests is kept
        self._closed = False
        try:
            self._connect(box.connection_info())
        except BaseException:
            self._stop_client()
            box.remove()
            raise

    @property
    def description(self) -> str:
        return self._box.description

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
            user_expressions={_THREADS: _THREADS_EXPR},
        )
        self._cell = _RunningCell(msg_id=msg_id, sent_at=time.perf_counter())
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
        self, cell: _RunningCell, out: CappedText, started: float, what: str
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

    def _finish(self, cell: _RunningCell, out: CappedText, started: float) -> CellResult:
        """The cell's idle status was seen: read its reply, wait out late output if needed."""
        reply = self._read_reply(cell.msg_id)
        idle_at = time.perf_counter()
        self._cell = None
        content = reply.get("content", {}) if reply else {}
        status: CellStatus = "error" if cell.error_seen else "ok"
        if content.get("status") in ("error", "aborted"):
            status = "error"
        threads = _expression_value(content.get("user_expressions", {}), _THREADS)
        if threads is not None and threads.isdigit() and int(threads) > self._baseline_threads:
            self._late_output(cell, out)
        return CellResult(
            output=out.text(),
            status=status,
            duration_s=idle_at - started,
            truncated=out.truncated,
        )

    def _late_output(self, cell: _RunningCell, out: CappedText) -> None:
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

    def _next_iopub(self, timeout: float) -> dict[str, Any]:
        """The next IOPub message (Empty when none came in `timeout`). One the client cannot read
        (a bad signature: the task can reach its kernel's session and send its own) comes back as
        {UNREADABLE: reason}: the task's doing, noted in the cell's output, never a harness fault."""
        client = self._live_client()
        try:
            msg = client.iopub_channel.get_msg(timeout=timeout)
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
            return {UNREADABLE: f"{type(exc).__name__}: {str(exc)[:200]}"}
        return msg if isinstance(msg, dict) else {UNREADABLE: "not a message"}

    def _drain(self, cell: _RunningCell, out: CappedText, deadline: float) -> str:
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

    def _drain_ready(self, cell: _RunningCell, out: CappedText) -> bool:
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

    def _take(self, msg: dict[str, Any], cell: _RunningCell | None, out: CappedText) -> bool:
        """Record one IOPub message; True if it is the idle status of `cell`. A message that is
        not what the protocol says (unreadable, a stream whose text is a number, fields missing)
        is noted in the output of the running cell and otherwise left out."""
        if UNREADABLE in msg:
            if cell is not None:
                out.append_block(f"[{MALFORMED_NOTE}: {msg[UNREADABLE]}]")
            return False
        try:
            return self._take_valid(msg, cell, out)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            if cell is not None:
                out.append_block(f"[{MALFORMED_NOTE}: {type(exc).__name__}: {str(exc)[:200]}]")
            return False

    def _take_valid(self, msg: dict[str, Any], cell: _RunningCell | None, out: CappedText) -> bool:
        kind = msg["msg_type"]
        content = msg["content"]
        parent = msg["parent_header"]
        ours = cell is not None and parent.get("msg_id") == cell.msg_id
        if kind == "status":
            return ours and content.get("execution_state") == "idle"
        if not ours and (
            parent.get("msg_type") != "execute_request" or parent.get("session") != self._session
        ):
            return False  # start-up chatter (debugger warnings) or another client's cell
        if content.get(CUT_KEY):
            out.mark_cut_before()
        if kind == "stream":
            out.append(_text(content.get("text", ""), "stream text"))
        elif kind in ("execute_result", "display_data"):
            out.append_block(_text(content.get("data", {}).get("text/plain", ""), "text/plain"))
        elif kind == "error" and ours:
            assert cell is not None
            cell.error_seen = True
            traceback = "\n".join(content.get("traceback", []))
            out.append_block(
                f"{content.get('ename', '')}: {content.get('evalue', '')}\n{traceback}"
            )
        return False

    def _read_reply(self, msg_id: str, timeout: float = 5.0) -> dict[str, Any] | None:
        """The shell reply to `msg_id` (it is sent before the idle status, so normally waiting)."""
        client = self._live_client()
        deadline = time.perf_counter() + timeout
        while (left := deadline - time.perf_counter()) > 0:
            try:
                msg: dict[str, Any] = client.shell_channel.get_msg(timeout=left)
            except Empty:
                return None
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg
        return None

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

    def _take_carry(self) -> CappedText:
        out, self._carry = self._carry, CappedText(self._cap)
        return out

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

    def _silent_request(
        self, code: str, expressions: dict[str, str], doing: str
    ) -> dict[str, dict[str, Any]]:
        """Run `code` silently (no history, no output) and return its evaluated `expressions`."""
        client = self._live_client()
        msg_id = client.execute(
            code,
            silent=True,
            store_history=False,
            allow_stdin=False,
            user_expressions=expressions,
        )
        deadline = time.perf_counter() + SILENT_REQUEST_TIMEOUT_S
        next_check = time.perf_counter() + ALIVE_CHECK_INTERVAL_S
        while True:
            while client.iopub_channel.msg_ready():  # keep IOPub drained; keep stray output
                self._take(client.iopub_channel.get_msg(timeout=0), None, self._carry)
            now = time.perf_counter()
            if now >= next_check:
                if not self._box.is_alive():
                    reason = self._box.death_reason() or "reason unknown"
                    self._restart_box()
                    raise InfrastructureError(
                        f"the kernel in {self.description} died ({reason}) while {doing}; "
                        "it was restarted (variables lost)"
                    )
                next_check = now + ALIVE_CHECK_INTERVAL_S
            if now >= deadline:
                raise InfrastructureError(
                    f"the kernel in {self.description} did not answer within "
                    f"{SILENT_REQUEST_TIMEOUT_S:g} s while {doing}"
                )
            try:
                msg = client.shell_channel.get_msg(timeout=min(0.05, deadline - now))
            except Empty:
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                content = msg["content"]
                if content.get("status") != "ok":
                    raise InfrastructureError(
                        f"the kernel in {self.description} failed while {doing}: "
                        f"{content.get('ename')}: {content.get('evalue')}"
                    )
                replies: dict[str, dict[str, Any]] = content.get("user_expressions", {})
                return replies

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

    def _live_client(self) -> BlockingKernelClient:
        if self._closed or self._client is None:
            raise RuntimeError(f"{self.description} is closed")
        return self._client

    def _restart_box(self) -> None:
        """A new kernel process in the box. Once the task has run code here, a kernel that will
        not start again is the task's doing (`KernelBroken`), not a fault to retry."""
        self._stop_client()
        try:
            self._connect(self._box.restart())
        except KernelStartError as exc:
            if not self._ran_code:
                raise
            raise KernelBroken(
                f"the kernel in {self.description} did not start again after the task's code "
                f"ran ({exc}); the episode ends here"
            ) from exc

    def _stop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            _release(client)

    def _connect(self, info: dict[str, Any]) -> None:
        client = BlockingKernelClient()
        client.load_connection_info(cast("KernelConnectionInfo", info))
        # defaults for the sockets the client is about to make: a hard bound on what one frame
        # and the receive queue may hold, whatever the kernel sends
        client.context.setsockopt(zmq.MAXMSGSIZE, max_frame_bytes(self._cap))
        client.context.setsockopt(zmq.RCVHWM, RECEIVE_QUEUE_MESSAGES)
        try:
            client.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=True)
        except BaseException:
            _release(client)
            raise
        self._client = client
        self._session = client.session.session
        self._wait_ready()
        setup = f"__import__('os').chdir({self._working_dir!r})" if self._working_dir else "0"
        values = self._silent_request(
            _install_message_cap(self._cap) + "\n" + _CLOSED_STDIN + ".install()",
            {"cd": setup, _THREADS: _THREADS_EXPR},
            "setting up the kernel",
        )
        if values.get("cd", {}).get("status") != "ok":
            raise KernelStartError(
                f"the kernel in {self.description} could not change to its working directory "
                f"{self._working_dir!r}: {values['cd'].get('ename')}: {values['cd'].get('evalue')}; "
                "check that the directory exists in the box"
            )
        threads = _expression_value(values, _THREADS)
        self._baseline_threads = int(threads) if threads and threads.isdigit() else 0

    def _wait_ready(self) -> None:
        """Until the kernel answers kernel_info on shell AND its IOPub reaches us.

        Seeing IOPub traffic for our own request proves the subscription is live, so no output
        of the first cell can be lost to a late subscription.
        """
        client = self._client
        assert client is not None
        deadline = time.perf_counter() + self._startup_timeout_s
        sent: set[str] = set()
        replied = published = False
        while not (replied and published):
            if not self._box.is_alive():
                reason = self._box.death_reason() or "reason unknown"
                raise KernelStartError(
                    f"the kernel in {self.description} exited before it answered ({reason}); "
                    "check that ipykernel is installed where the kernel runs and look at the "
                    "kernel's log"
                )
            if time.perf_counter() >= deadline:
                info = self._box.connection_info()
                raise KernelStartError(
                    f"the kernel in {self.description} did not answer within "
                    f"{self._startup_timeout_s:g} s on {info.get('ip')} ports "
                    f"{info.get('shell_port')}/{info.get('iopub_port')}; check that the kernel "
                    "process started, that those ports are reachable from here, and raise the "
                    "startup timeout on a slow machine"
                )
            sent.add(client.kernel_info())
            until = min(time.perf_counter() + 0.1, deadline)  # resend soon: IOPub may join late
            while not (replied and published) and (left := until - time.perf_counter()) > 0:
                for channel in (client.shell_channel, client.iopub_channel):
                    try:
                        msg = channel.get_msg(timeout=min(left, 0.02))
                    except Empty:
                        continue
                    if msg["parent_header"].get("msg_id") in sent:
                        if channel is client.shell_channel:
                            replied = True
                        else:
                            published = True
                    elif channel is client.iopub_channel:
                        self._take(msg, None, self._carry)
        # the status messages of the other kernel_info requests are still coming: drop them
        while client.iopub_channel.msg_ready():
            self._take(client.iopub_channel.get_msg(timeout=0), None, self._carry)


def max_frame_bytes(output_cap_bytes: int) -> int:
    """The largest frame the client receives: a capped message (`message_cap` keeps its text
    within half the cap) or a whole read file in base64 (4/3 of its size), plus headroom."""
    return max(output_cap_bytes, 2 * MAX_READ_BYTES) + FRAME_HEADROOM_BYTES


@functools.cache
def _message_cap_source() -> str:
    return resources.files("pytest_super.kernels.inside").joinpath("message_cap.py").read_text()


def _install_message_cap(cap_bytes: int) -> str:
    """Code that installs `message_cap` in the kernel, in a namespace of its own."""
    return (
        f"(lambda ns: (exec(compile({_message_cap_source()!r}, '<pytest-super message_cap>', "
        f"'exec'), ns), ns['install']({cap_bytes})))({{'__name__': 'pytest_super_message_cap'}})"
    )


#: the key of a message the client could not read, and what the cell's output says of one
UNREADABLE = "_pytest_super_unreadable"
MALFORMED_NOTE = "a message from the kernel was not readable and was left out"


def _text(value: Any, what: str) -> str:
    """A message's text field, which the protocol says is a string (a list of lines is joined)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    raise TypeError(f"its {what} is {type(value).__name__}, not text")


def _expression_value(values: dict[str, Any], name: str) -> str | None:
    result = values.get(name)
    if not result or result.get("status") != "ok":
        return None
    text: str | None = result.get("data", {}).get("text/plain")
    return text


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _release(client: BlockingKernelClient) -> None:
    """Close a client's sockets and its ZeroMQ context now. A context left to the garbage
    collector is destroyed from whatever thread collects it, and a worker hung there for good
    (in `Context.term`) after a run of the suite."""
    with contextlib.suppress(Exception):  # a half-connected client: nothing to release
        client.stop_channels()
    with contextlib.suppress(Exception):
        if not client.context.closed:
            client.context.destroy(linger=0)
