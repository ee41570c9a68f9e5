"""One kernel's connection over the Jupyter protocol: the client's channels to a kernel in a `Box`,
started and waited for until the kernel answers (with the message cap and the closed stdin shipped
in), silent requests, IOPub messages read into a cell's output, and a new kernel process in the
box after a death. `JupyterKernel` (runtime.py) runs cells and reads files over it.

Memory: the client's sockets refuse any frame above `max_frame_bytes` and queue at most
`RECEIVE_QUEUE_MESSAGES` messages (runtime.py's docstring says why).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from queue import Empty
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import zmq
from jupyter_client.blocking.client import BlockingKernelClient

if TYPE_CHECKING:
    from jupyter_client.connect import KernelConnectionInfo

from pytest_super.errors import InfrastructureError, KernelBroken, KernelStartError
from pytest_super.kernels.inside import kernel_module
from pytest_super.kernels.inside.message_cap import CUT_KEY
from pytest_super.kernels.jupyter.box import Box
from pytest_super.kernels.jupyter.output import CappedText

#: How often `Box.is_alive` is asked while waiting for a cell.
ALIVE_CHECK_INTERVAL_S = 1.0
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

#: the user expression, sent with each cell, that counts the kernel's threads (a cell that leaves
#: one running gets the late-output grace: runtime.py)
THREADS = "pytest_super_threads"
THREADS_EXPR = "__import__('threading').active_count()"


#: a Jupyter message, or a part of one, as jupyter_client gives it (`get_msg` returns
#: dict[str, Any]); its fields are read as the protocol says, each read guarded (`_take`)
Message: TypeAlias = dict[str, Any]  # Any: jupyter_client (`Session.recv`, `get_msg`)


@dataclass
class RunningCell:
    """A cell sent to the kernel whose idle status has not been seen yet."""

    msg_id: str
    sent_at: float
    error_seen: bool = False


#: shell commands of a cell read end-of-file from stdin (`closed_stdin`, shipped as source)
_CLOSED_STDIN = kernel_module("pytest_super.kernels.inside", "closed_stdin.py")


class KernelConnection:
    """The connection to a kernel in a `Box`: its client, the cell running in it, the stream text
    no cell has claimed yet. `JupyterKernel` builds on it."""

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
        self._cell: RunningCell | None = None
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

    def _next_iopub(self, timeout: float) -> Message:
        """The next IOPub message (Empty when none came in `timeout`). One the client cannot read
        (a bad signature: the task can reach its kernel's session and send its own) comes back as
        {UNREADABLE: reason}: the task's doing, noted in the cell's output, never a harness fault."""
        client = self._live_client()
        try:
            msg = client.iopub_channel.get_msg(timeout=timeout)
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
            return {UNREADABLE: f"{type(exc).__name__}: {str(exc)[:200]}"}
        return msg if isinstance(msg, dict) else {UNREADABLE: "not a message"}

    def _take(self, msg: Message, cell: RunningCell | None, out: CappedText) -> bool:
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

    def _take_valid(self, msg: Message, cell: RunningCell | None, out: CappedText) -> bool:
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

    def _read_reply(self, msg_id: str, timeout: float = 5.0) -> Message | None:
        """The shell reply to `msg_id` (it is sent before the idle status, so normally waiting)."""
        client = self._live_client()
        deadline = time.perf_counter() + timeout
        while (left := deadline - time.perf_counter()) > 0:
            try:
                msg: Message = client.shell_channel.get_msg(timeout=left)
            except Empty:
                return None
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg
        return None

    def _take_carry(self) -> CappedText:
        out, self._carry = self._carry, CappedText(self._cap)
        return out

    def _silent_request(
        self, code: str, expressions: dict[str, str], doing: str
    ) -> dict[str, Message]:
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
                replies: dict[str, Message] = content.get("user_expressions", {})
                return replies

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

    def _connect(self, info: Mapping[str, object]) -> None:
        client = KernelClient()
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
            {"cd": setup, THREADS: THREADS_EXPR},
            "setting up the kernel",
        )
        if values.get("cd", {}).get("status") != "ok":
            raise KernelStartError(
                f"the kernel in {self.description} could not change to its working directory "
                f"{self._working_dir!r}: {values['cd'].get('ename')}: {values['cd'].get('evalue')}; "
                "check that the directory exists in the box"
            )
        threads = expression_value(values, THREADS)
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


def _text(value: object, what: str) -> str:
    """A message's text field, which the protocol says is a string (a list of lines is joined)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    raise TypeError(f"its {what} is {type(value).__name__}, not text")


def expression_value(values: Message, name: str) -> str | None:
    result = values.get(name)
    if not result or result.get("status") != "ok":
        return None
    text: str | None = result.get("data", {}).get("text/plain")
    return text


class KernelClient(BlockingKernelClient):
    """jupyter_client's blocking client, whose collection holds when a Ctrl-C cut its making: the
    KeyboardInterrupt that lands in traitlets' `setup_instance` leaves an object without its
    trait values, and `KernelClient.__del__` raised from it into the unraisable hook (pytest
    printed that warning and its traceback after an interrupted run: CI of 4c95659)."""

    def __del__(self) -> None:
        if "_trait_values" in vars(self):  # else nothing was made: nothing to release
            super().__del__()


def _release(client: BlockingKernelClient) -> None:
    """Close a client's sockets and its ZeroMQ context now. A context left to the garbage
    collector is destroyed from whatever thread collects it, and a worker hung there for good
    (in `Context.term`) after a run of the suite."""
    with contextlib.suppress(Exception):  # a half-connected client: nothing to release
        client.stop_channels()
    with contextlib.suppress(Exception):
        if not client.context.closed:
            client.context.destroy(linger=0)
